//! What a journal holds when an array starts: how many entries a start would
//! replay, which stripes they cover, and the replay itself (each complete
//! entry's blocks written to the members, in sequence, before any new write).
//! It never appends to the journal; the running journal is `super`'s.

use super::*;

/// How many meta blocks with payloads a journal holds from `journal_tail` on
/// (in sequence, as recovery would read them): 0 after a clean stop, more when
/// a start would replay something. Reads only.
pub fn pending(device: &dyn Volume, sb: &Superblock, set_uuid: &[u8; 16]) -> Result<u64> {
    let (_, ring) = fmt::ring(sb).map_err(|e| e.on_device(device.name()))?;
    pending_from(
        device,
        sb,
        fmt::uuid_seed(set_uuid),
        ring,
        fmt::start_position(sb, ring),
    )
}

pub(super) fn pending_from(
    dev: &dyn Volume,
    sb: &Superblock,
    seed: u32,
    ring: u64,
    cp: u64,
) -> Result<u64> {
    let mut pos = cp;
    let mut seq = None;
    let mut count = 0;
    let mut walked = 0;
    while walked < ring {
        let Ok(mb) = MetaBlock::parse(&fmt::read_block(dev, sb, pos)?, seed) else {
            break;
        };
        if mb.position != pos || seq.is_some_and(|s| s != mb.seq) {
            break;
        }
        if !mb.payloads.is_empty() {
            count += 1;
        }
        seq = Some(mb.seq + 1);
        let blocks = 1 + mb.pages();
        pos = fmt::ring_add(pos, blocks * BLOCK_SECTORS, ring);
        walked += blocks * BLOCK_SECTORS;
    }
    Ok(count)
}

/// One stripe row's new blocks, gathered from journal entries: data by
/// (role, member offset), P and Q.
#[derive(Default)]
pub(super) struct Row<'a> {
    pub(super) data: Vec<(usize, u64, &'a [u8])>,
    pub(super) p: Option<&'a [u8]>,
    pub(super) q: Option<&'a [u8]>,
}

/// What a start would change: the journal read from `journal_tail` as a
/// replay would, each stripe's logged pages compared with what `array`'s
/// members hold (nothing written). The report counts the stripes that differ
/// (none after a clean stop; md's tail block is replayed at every start but
/// matches the members) and, of those, the ones whose data differs.
pub fn unreplayed(
    device: &dyn Volume,
    sb: &Superblock,
    set_uuid: &[u8; 16],
    array: &dyn ReplayTarget,
) -> Result<JournalReplay> {
    let (_, ring) = fmt::ring(sb).map_err(|e| e.on_device(device.name()))?;
    let seed = fmt::uuid_seed(set_uuid);
    let cp = fmt::start_position(sb, ring);
    let Ok(mb) = MetaBlock::parse(&fmt::read_block(device, sb, cp)?, seed) else {
        return Ok(JournalReplay::default());
    };
    if mb.position != cp {
        return Ok(JournalReplay::default());
    }
    let geo = *array.geometry();
    let mut report = JournalReplay::default();
    replay(
        device,
        sb,
        &geo,
        seed,
        ring,
        (cp, mb.seq),
        array,
        true,
        &mut report,
    )?;
    Ok(report)
}

/// Read the log from `cp` (sequence `seq`) and write complete stripes back, as
/// md's recovery does (with `dry`, count the stripes whose logged pages differ
/// from the members instead of writing). Returns where the log ends and the
/// sequence expected there.
#[allow(clippy::too_many_arguments)]
pub(super) fn replay(
    dev: &dyn Volume,
    sb: &Superblock,
    geo: &Geometry,
    seed: u32,
    ring: u64,
    (cp, seq): (u64, u64),
    array: &dyn ReplayTarget,
    dry: bool,
    report: &mut JournalReplay,
) -> Result<(u64, u64)> {
    let mut pos = cp;
    let mut seq = seq;
    let mut cache: BTreeMap<u64, Gathered> = BTreeMap::new();
    // At most one pass around the ring: a log can never be longer.
    let mut walked = 0u64;
    while walked < ring {
        let block = fmt::read_block(dev, sb, pos)?;
        let Ok(mb) = MetaBlock::parse(&block, seed) else {
            break;
        };
        if mb.seq != seq || mb.position != pos {
            break;
        }
        report.meta_blocks += 1;
        // Read and check every page first: one bad page drops the whole block.
        let mut pages = Vec::new();
        let mut at = fmt::ring_add(pos, BLOCK_SECTORS, ring);
        let mut ok = true;
        for p in &mb.payloads {
            let sums: Vec<u32> = match p {
                Payload::Data { checksum, .. } => vec![*checksum],
                Payload::Parity { checksums, .. } => checksums.clone(),
                Payload::Flush { .. } => Vec::new(),
            };
            let mut got = Vec::new();
            for c in sums {
                let page = fmt::read_block(dev, sb, at)?;
                ok &= fmt::page_checksum(seed, &page) == c;
                got.push(page);
                at = fmt::ring_add(at, BLOCK_SECTORS, ring);
            }
            pages.push(got);
        }
        let blocks = 1 + mb.pages();
        if !ok {
            // md: skip the block's data, move on by one block.
            report.torn_blocks += 1;
            pos = fmt::ring_add(pos, BLOCK_SECTORS, ring);
            seq += 1;
            walked += BLOCK_SECTORS;
            continue;
        }
        for (p, got) in mb.payloads.iter().zip(pages) {
            match p {
                Payload::Data { location, .. } => {
                    let array_at = location * SECTOR;
                    let Some((role, moff)) = locate(geo, array_at) else {
                        return Err(bad_log(dev, pos, "a data page outside the array"));
                    };
                    if cache.get(&moff).is_some_and(|g| g.parity.is_some()) {
                        // New data after a complete stripe: that one went out first.
                        if let Some(g) = cache.remove(&moff) {
                            write_back(array, geo, moff, &g, dry, report)?;
                        }
                    }
                    let g = cache.entry(moff).or_default();
                    let page = got.into_iter().next().unwrap_or_default();
                    g.data.insert(role, page.clone());
                    g.data_at.insert(array_at, page);
                }
                Payload::Parity { location, .. } => {
                    let moff = location * SECTOR;
                    if moff % PAGE != 0 || moff >= geo.member_bytes {
                        return Err(bad_log(dev, pos, "a parity page outside the members"));
                    }
                    cache.entry(moff).or_default().parity = Some(got);
                }
                Payload::Flush { stripes, .. } => {
                    for s in stripes {
                        cache.remove(&(s * SECTOR));
                    }
                }
            }
        }
        pos = fmt::ring_add(pos, blocks * BLOCK_SECTORS, ring);
        seq += 1;
        walked += blocks * BLOCK_SECTORS;
    }
    if planted!(JournalReplayDropsLastStripe) {
        cache.pop_last(); // PLANTED BUG (tests only, `planted.rs`)
    }
    for (moff, g) in &cache {
        write_back(array, geo, *moff, g, dry, report)?;
    }
    if !dry {
        array.flush()?;
    }
    Ok((pos, seq))
}

/// Write one gathered stripe to the members: data and parity pages when the
/// parity is there (md replays only those with data), else the data alone
/// through the array, which computes parity.
pub(super) fn write_back(
    array: &dyn ReplayTarget,
    geo: &Geometry,
    moff: u64,
    g: &Gathered,
    dry: bool,
    report: &mut JournalReplay,
) -> Result<()> {
    if g.data.is_empty() {
        return Ok(());
    }
    match &g.parity {
        Some(parity) => {
            let map = geo.stripe(moff / geo.chunk_bytes);
            let parity_roles = [Some(map.p), map.q];
            let pages = g
                .data
                .iter()
                .map(|(r, p)| (Some(*r), p))
                .chain(parity_roles.into_iter().zip(parity));
            // The stripe's pages go back to the members as one plan (the
            // replay flushes once at its end); a dry run reads them as one
            // plan instead and compares.
            let mut writes = DeviceWrites::data_area();
            let table: Vec<Option<Arc<dyn Volume>>> =
                (0..geo.raid_disks).map(|r| array.member(r)).collect();
            for (role, page) in pages {
                if let Some(r) = role.filter(|&r| table.get(r).is_some_and(Option::is_some)) {
                    writes.push(r, moff, page);
                }
            }
            let changed = if dry {
                let ranges: Vec<(usize, u64, usize)> = writes
                    .plan()
                    .writes()
                    .map(|w| (w.member, w.offset, w.length as usize))
                    .collect();
                let now = crate::metadata_plan::read_ranges(
                    array.executor().as_ref(),
                    &table,
                    &ranges,
                    crate::plan::Space::Data,
                )?;
                // Compare range by range to tell data that is not on the
                // members from parity that is merely stale.
                let (mut at, mut any, mut data) = (0usize, false, false);
                for &(member, _, len) in &ranges {
                    let differs = now[at..at + len] != writes.bytes()[at..at + len];
                    any |= differs;
                    data |= differs && !parity_roles.contains(&Some(member));
                    at += len;
                }
                if data {
                    report.data_not_on_members += 1;
                }
                any
            } else {
                writes.run(array.executor().as_ref(), &table)?;
                false
            };
            if !dry || changed {
                report.stripes_replayed += 1;
            }
        }
        None => {
            let mut changed = false;
            for (at, page) in &g.data_at {
                if dry {
                    let mut now = vec![0u8; page.len()];
                    array.read_at(&mut now, *at)?;
                    changed |= now != *page;
                } else {
                    array.write_at(page, *at)?;
                }
            }
            if dry && changed {
                report.data_not_on_members += 1;
            }
            if !dry || changed {
                report.data_only_stripes += 1;
            }
        }
    }
    Ok(())
}

/// The member role and byte offset of array byte `at` (a data block).
pub(super) fn locate(geo: &Geometry, at: u64) -> Option<(usize, u64)> {
    if at % PAGE != 0 || at >= geo.array_bytes() {
        return None;
    }
    let dd = geo.data_disks() as u64;
    let chunk = geo.chunk_bytes;
    let stripe = at / (chunk * dd);
    let index = ((at / chunk) % dd) as usize;
    let map = geo.stripe(stripe);
    Some((*map.data.get(index)?, stripe * chunk + at % chunk))
}
