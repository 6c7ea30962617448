//! What simulated members hold, where a configuration says their copies
//! differ: simulated members hold no data (every byte reads as zero, which is
//! consistent on every level), except in the `mismatch` ranges a configuration
//! gives, where one role holds other bytes. A scrub step hands the pages it
//! read to the engine's own comparison (`raidlab_raid::recovery::compare_parity`
//! on RAID 4/5/6, `compare_mirror` on RAID 1/10: what `raidlab check` and
//! `raidlab repair` run), and a repair stores what the engine rewrote, so the
//! range then compares consistent.
//!
//! Decides: the grammar of a mismatch range and the sparse page store. It
//! must never decide what differs or what to rewrite (the engine's comparison
//! does), and it keeps pages only where a range or a rewrite put them.
//! Host writes do not change the contents: the simulator carries no data.

use raidlab_core::size::parse_size;
use raidlab_layout::{Content, Geometry};
use raidlab_raid::recovery::{compare_mirror, compare_parity, SCRUB_PAGE};
use raidlab_raid::recovery_plan::plan_scrub_mirrors;
use std::collections::{BTreeMap, BTreeSet};

/// Bytes `[offset, offset+len)` of role `role`'s data area differ from what
/// the other members say they should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MismatchRange {
    pub role: usize,
    pub offset: u64,
    pub len: u64,
}

/// Parse `ROLE@OFFSET+LENGTH[,ROLE@OFFSET+LENGTH...]`, sizes with the usual
/// suffixes (`1@1G+64K`: role 1's 64 KiB at 1 GiB of its data area).
pub fn parse_mismatches(s: &str) -> Result<Vec<MismatchRange>, String> {
    s.split(',')
        .map(|part| {
            let bad = |why: String| {
                format!("mismatch range `{part}`: {why}; write ROLE@OFFSET+LENGTH, e.g. 1@1G+64K")
            };
            let (role, rest) = part.split_once('@').ok_or_else(|| bad("no `@`".into()))?;
            let (offset, len) = rest.split_once('+').ok_or_else(|| bad("no `+`".into()))?;
            let role = role
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{role}` is not a role number")))?;
            let offset = parse_size(offset.trim()).map_err(|e| bad(e.to_string()))?;
            let len = parse_size(len.trim()).map_err(|e| bad(e.to_string()))?;
            if len == 0 {
                return Err(bad("the length is 0".into()));
            }
            Ok(MismatchRange { role, offset, len })
        })
        .collect()
}

/// Check ranges against an array: a level with redundancy to compare (not
/// RAID 0), a role that is there, inside the data area.
pub fn check_mismatches(
    geo: &Geometry,
    failed: &[usize],
    ranges: &[MismatchRange],
) -> Result<(), String> {
    if !ranges.is_empty() && geo.level == raidlab_layout::Level::Raid0 {
        return Err(
            "mismatch ranges need a level with parity or copies to compare; RAID 0 has neither (use RAID 1, 4, 5, 6 or 10)"
                .into(),
        );
    }
    for r in ranges {
        if r.role >= geo.raid_disks || failed.contains(&r.role) {
            return Err(format!(
                "mismatch range on role {}: the array has no such member in service (roles 0..{}, failed {failed:?})",
                r.role, geo.raid_disks
            ));
        }
        if r.offset
            .checked_add(r.len)
            .map_or(true, |e| e > geo.member_bytes)
        {
            return Err(format!(
                "mismatch range {}@{}+{} ends past the member's data area ({} bytes)",
                r.role, r.offset, r.len, geo.member_bytes
            ));
        }
    }
    if !ranges.is_empty() && !raidlab_raid::recovery_plan::scrub_can_compare(geo, failed) {
        return Err(format!(
            "mismatch ranges on a {} array with role(s) {failed:?} failed: no redundancy is left to compare them with",
            geo.level.name()
        ));
    }
    Ok(())
}

/// What a comparison found in a scrub step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compared {
    /// md's mismatch count: sectors of mismatched pages.
    pub mismatch_sectors: u64,
    /// With repair, what the engine rewrites: (role, member offset, length).
    pub rewrites: Vec<(usize, u64, usize)>,
}

/// The members' differing pages, by (page offset, role); absent pages are
/// zeros.
#[derive(Debug, Default)]
pub(crate) struct Contents {
    pages: BTreeMap<(u64, usize), Box<[u8]>>,
    /// Mirrors: the array pages the stored pages are copies of (found at
    /// the first comparison, which knows the geometry).
    array_pages: Option<BTreeSet<u64>>,
}

impl Contents {
    /// Members holding zeros except in `ranges`, where a role holds a
    /// byte pattern of its own (`0xA5` XOR the role number).
    pub(crate) fn new(ranges: &[MismatchRange]) -> Contents {
        let mut c = Contents::default();
        let page = SCRUB_PAGE as u64;
        for r in ranges {
            let end = r.offset + r.len;
            let mut at = r.offset / page * page;
            while at < end {
                let buf = c
                    .pages
                    .entry((at, r.role))
                    .or_insert_with(|| vec![0; SCRUB_PAGE].into());
                let from = r.offset.max(at) - at;
                let to = end.min(at + page) - at;
                buf[from as usize..to as usize].fill(0xA5 ^ r.role as u8);
                at += page;
            }
        }
        c
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Run the engine's comparison over the scrub step `[from, to)` (member
    /// bytes on parity levels, array bytes on mirrors, as the scrub walks),
    /// and with `repair` keep what it rewrote.
    pub(crate) fn compare(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        from: u64,
        to: u64,
        repair: bool,
    ) -> Compared {
        if geo.is_parity() {
            self.compare_parity(geo, present, from, to, repair)
        } else {
            self.compare_mirror(geo, present, from, to, repair)
        }
    }

    /// Parity levels: every page of `[from, to)` of the member areas that
    /// holds anything but zeros (the others compare consistent).
    fn compare_parity(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        from: u64,
        to: u64,
        repair: bool,
    ) -> Compared {
        let mut offsets: Vec<u64> = self
            .pages
            .range((from, 0)..(to, 0))
            .map(|(&(at, _), _)| at)
            .collect();
        offsets.dedup();
        let roles = present.len();
        let mut out = Compared::default();
        let mut buf = vec![0u8; roles * SCRUB_PAGE];
        for at in offsets {
            buf.fill(0);
            for role in 0..roles {
                if let Some(p) = self.pages.get(&(at, role)) {
                    buf[role * SCRUB_PAGE..(role + 1) * SCRUB_PAGE].copy_from_slice(p);
                }
            }
            let mut bufs: Vec<&mut [u8]> = buf.chunks_mut(SCRUB_PAGE).collect();
            let (sectors, fixes) = compare_parity(geo, &mut bufs, present, at, repair);
            out.mismatch_sectors += sectors;
            for &(role, off, len) in &fixes {
                // The engine fixed `bufs` in place: that is what the member
                // holds after the rewrite.
                let page = &bufs[role][..];
                if page.iter().all(|&b| b == 0) {
                    self.pages.remove(&(at, role));
                } else {
                    self.pages.insert((at, role), page.into());
                }
                out.rewrites.push((role, off, len));
            }
        }
        out
    }

    /// Mirrors: each array page of `[from, to)` that some stored page holds
    /// a copy of, read as the engine's scrub reads it (`plan_scrub_mirrors`,
    /// page by page: md compares mirror copies page by page too); the engine
    /// compares the copies and says what to rewrite.
    fn compare_mirror(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        from: u64,
        to: u64,
        repair: bool,
    ) -> Compared {
        let page = SCRUB_PAGE as u64;
        let pages = &self.pages;
        // Which array pages the stored pages hold copies of, found once
        // (rewrites only ever touch copies of these pages).
        let array_pages = self.array_pages.get_or_insert_with(|| {
            pages
                .keys()
                .filter_map(|&(at, role)| match geo.content_at(role, at) {
                    Content::Data(logical) => Some(logical / page * page),
                    _ => None,
                })
                .collect()
        });
        let due: Vec<u64> = array_pages.range(from / page * page..to).copied().collect();
        let mut out = Compared::default();
        let mut buf = Vec::new();
        for at in due {
            let (a, b) = (at.max(from), (at + page).min(to));
            let Ok(scrub) = plan_scrub_mirrors(geo, present, a, b - a) else {
                continue;
            };
            buf.clear();
            buf.resize(scrub.len, 0);
            for run in &scrub.runs {
                for &(loc, at) in &run.copies {
                    self.read(loc.member, loc.offset, &mut buf[at..at + run.len as usize]);
                }
            }
            let (sectors, writes) = compare_mirror(geo, &scrub, &buf, repair);
            out.mismatch_sectors += sectors;
            for (role, offset, src, len) in writes {
                self.write(role, offset, &buf[src..src + len]);
                out.rewrites.push((role, offset, len));
            }
        }
        out
    }

    /// Role `role`'s bytes at member offset `offset` (zeros where no page
    /// is stored).
    pub(crate) fn read(&self, role: usize, offset: u64, buf: &mut [u8]) {
        for (base, within, done, n) in spans(offset, buf.len()) {
            let dst = &mut buf[done..done + n];
            match self.pages.get(&(base, role)) {
                Some(p) => dst.copy_from_slice(&p[within..within + n]),
                None => dst.fill(0),
            }
        }
    }

    /// Store `bytes` as role `role`'s at member offset `offset`; a page
    /// left all zeros is dropped (zeros are what an absent page holds).
    pub(crate) fn write(&mut self, role: usize, offset: u64, bytes: &[u8]) {
        for (base, within, done, n) in spans(offset, bytes.len()) {
            let p = self
                .pages
                .entry((base, role))
                .or_insert_with(|| vec![0; SCRUB_PAGE].into());
            p[within..within + n].copy_from_slice(&bytes[done..done + n]);
            if p.iter().all(|&b| b == 0) {
                self.pages.remove(&(base, role));
            }
        }
    }
}

/// `[offset, offset+len)` of a member cut at page boundaries: (page offset,
/// offset within the page, bytes before this piece, piece length).
fn spans(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let page = SCRUB_PAGE as u64;
    let mut done = 0;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let at = offset + done as u64;
        let base = at / page * page;
        let within = (at - base) as usize;
        let n = (SCRUB_PAGE - within).min(len - done);
        let piece = (base, within, done, n);
        done += n;
        Some(piece)
    })
}
