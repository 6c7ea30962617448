//! `grow`, as md grows an array in place: use more (or less) of each member
//! (`--size`), add or remove the internal write-intent bitmap, switch RAID 5
//! between resync and the partial parity log, change the number of RAID 1
//! mirrors, add members to a RAID 0/4/5/6 or 10 and take members out of a
//! RAID 0/4/5/6 or 10 (a reshape, `reshape` and `shrink`, walked by `walk`).
//!
//! Each change checks everything against md's rules first and writes only
//! the members' metadata (superblocks, bitmap, an empty log area), with the
//! event count raised, in one step; a change md refuses is refused with its
//! reason and nothing written. The data itself is moved only by the resync
//! and rebuild in `recovery` (the new space after `--size`, a new mirror).
//! Only a reshape moves data between stripes: more members of a RAID
//! 0/4/5/6 and of a RAID 10 in the near or offset layout, fewer members of
//! a RAID 0/4/5/6 and of a RAID 10 in the near or offset layout (with the
//! array size the user accepts: md reshapes only an array already
//! truncated; a RAID 0's through md's RAID 4, as its more members), a new
//! chunk or layout (a RAID 10's: near and offset with the same copies),
//! other members of a RAID 4/5/6 or 10 with a new chunk or layout in one
//! reshape (as md makes them: `delta_disks` with `new_chunk` and
//! `new_layout`),
//! RAID 4 to 5 and back, the layout half
//! of RAID 5 to 6 and back and of RAID 0 to 5 (whose takeovers are
//! `convert`'s and `raid0`'s; RAID 1 to 5 is a takeover alone,
//! `convert`'s); every other restripe (RAID 1 to other levels than 5) is
//! refused by
//! [`reshape_not_built`]; what md itself refuses is refused with its words
//! (a RAID 10 in or to the far layout or to other copies, `raid10`; RAID 0
//! to 6, `md_refusal`).
//!
//! Split by decision: this file sizes the members; `policy` decides the
//! consistency policy (bitmap, PPL); `devices` the RAID 1 mirror count;
//! `reshape` checks and starts a restripe (more members, chunk, layout,
//! more members with a chunk or layout, RAID 4 and 5); `shrink` fewer members of a RAID 4/5/6 and starts and
//! ends a RAID 10's too (md's backward reshape); `walk` moves the data of
//! any of them and finishes it;
//! `convert` takes RAID 5 over as RAID 6 and back, and a RAID 1 of two as
//! a RAID 5; `steps` plans a level change's steps (takeover, rebuild,
//! restripe) for the offline grow, the server and the fault simulation;
//! `raid0` decides how a
//! RAID 0 goes through md's RAID 4 without parity (restripes onto more or
//! fewer members or a new chunk, and RAID 0 to RAID 4 or 5); `raid10` what
//! md allows a RAID 10 (more or fewer members, a new chunk, near to offset
//! and back, never far, walked by `walk`; the component size md keeps of a
//! `--size`, never far).

mod backup_file;
mod convert;
mod devices;
mod in_place;
mod online;
mod policy;
mod raid0;
mod raid10;
mod reshape;
mod restripe_bitmap;
mod served_walk;
mod shrink;
mod steps;
mod walk;

pub use online::{ReshapeGate, ReshapingVolume};
pub use served_walk::ServedWalk;
pub(crate) use walk::ReshapeWalk;

pub use backup_file::BackupFile;
pub use convert::Conversion;
pub use devices::DevicesChange;
pub use policy::Policy;
pub use raid10::raid10_shapes_refusal;
pub use reshape::{ReshapePlan, ReshapeReport, ReshapeRequest, MAX_MOVE_SECTORS};
pub use steps::{conversion_steps, is_conversion, step_request, Step, Takeover};

use crate::assemble::{geometry_of, Assembly, MemberState};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::{Geometry, Level};
use raidlab_md::superblock::{feature, MetadataVersion};
use raidlab_md::Superblock;
use serde::Serialize;

const SECTOR: u64 = 512;

/// The component size asked for (`--size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeRequest {
    /// The largest size every member has room for.
    Max,
    /// This many bytes of each member.
    Bytes(u64),
}

/// What a change of the component size did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeChange {
    pub old_member_bytes: u64,
    pub new_member_bytes: u64,
    pub old_array_bytes: u64,
    pub new_array_bytes: u64,
    /// Where the resync of the new space starts (member byte), when one is
    /// due (grown, without `--assume-clean`).
    pub resync_from: Option<u64>,
    /// Bitmap chunks marked for the new space (0 without a bitmap).
    pub bitmap_chunks_marked: u64,
    /// The member (spares count) with the least room: what `max` is.
    pub tightest_member: String,
}

/// The refusal of every restripe raidlab does not do (level changes other than
/// RAID 4 and 5, 5 and 6, 0 to 4 or 5, a RAID 0's other members with a new
/// chunk at once): nothing is
/// written.
pub fn reshape_not_built(what: &str) -> Error {
    Error::new(
        ErrorKind::Refused,
        Op::Plan,
        format!(
            "{what} restripes the array in a way raidlab does not do yet (md's reshape); nothing was changed. Run `mdadm --grow` on Linux for it (raidlab reads an array md stopped mid-reshape, read-only); raidlab grow does --size, --bitmap, --consistency-policy, --raid-devices of RAID 1, more --raid-devices, fewer with --array-size and --chunk of RAID 0 (either with --chunk too), more --raid-devices of RAID 10 near or offset and fewer with --array-size (either with --chunk or --layout too), --chunk and --layout (near or offset) of RAID 10, --level 4, 5 or 10 of a RAID 0, --level 0 of a RAID 4, 5 or 10 near=2, --level 5 of a RAID 1 of two, and for RAID 4/5/6 more --raid-devices, fewer with --array-size, --chunk, --layout, either of those two with --raid-devices in one reshape, and --level between 4 and 5 and between 5 and 6"
        ),
    )
}

/// mdadm's reason for a level change it refuses outright (its
/// `analyse_change`), or mdadm's words when the kernel refuses the takeover
/// mdadm asks for, whatever raidlab builds; `None` for the changes md
/// makes.
pub(crate) fn md_refuses_level_change(from: Level, to: Level) -> Option<&'static str> {
    use Level::*;
    match (from, to) {
        // mdadm plans a RAID 0 to 6 as a RAID 6 in parity-last, but the
        // kernel's RAID 6 takes over nothing but a RAID 5, so setting the
        // level fails.
        (Raid0, Raid6) => Some("could not set level to raid6"),
        (Raid1, Raid4 | Raid6 | Raid10) => Some("Impossibly level change request for RAID1"),
        (Raid10, Raid1 | Raid4 | Raid5 | Raid6) => Some("RAID10 can only be changed to RAID0"),
        (Raid4 | Raid5 | Raid6, Raid10) | (Raid6, Raid0 | Raid1) => {
            Some("Impossible level change requested")
        }
        _ => None,
    }
}

/// The refusal of a level change md itself refuses, with its words.
pub(crate) fn md_refusal(what: &str, from: Level, to: Level) -> Option<Error> {
    md_refuses_level_change(from, to).map(|why| {
        refused(format!(
            "{what}: md does not make this change (mdadm: \"{why}\"){}; nothing was changed",
            match (from, to) {
                (Level::Raid6, Level::Raid0 | Level::Raid1) =>
                    ": take it to RAID 5 first (`raidlab grow --level 5`)",
                (Level::Raid0, Level::Raid6) =>
                    ": md's RAID 6 takes over only a RAID 5; go through one (`raidlab grow --level 5 --add DEV`, then `--level 6 --add DEV`)",
                (Level::Raid1, _) => ": a RAID 1 of two becomes a RAID 5 (`--level 5`)",
                (Level::Raid10, _) => ": a RAID 10 near=2 becomes a RAID 0 (`--level 0`)",
                _ => "",
            }
        ))
    })
}

fn refused(msg: String) -> Error {
    Error::new(ErrorKind::Refused, Op::Plan, msg)
}

impl Assembly {
    /// Refuse a change while a rebuild or a copy is under way (md refuses to
    /// change an array whose recovery runs: it would have to start over).
    pub(crate) fn grow_check_idle(&self, what: &str) -> Result<()> {
        if let Some(m) = self
            .members
            .iter()
            .find(|m| matches!(m.state, MemberState::Rebuilding | MemberState::Replacing))
        {
            return Err(refused(format!(
                "{} is being rebuilt into role {:?} ({:?}): {what} waits until that is done, as md refuses to change an array while it recovers; run `raidlab rebuild` with the same members first; nothing was changed",
                m.device.path,
                m.role.unwrap_or(0),
                m.state
            )));
        }
        Ok(())
    }

    /// Refuse another change while a reshape is recorded.
    pub(crate) fn grow_check_no_reshape(&self) -> Result<()> {
        if self.reshape().is_some() {
            return Err(refused(
                "the array is in the middle of a reshape: finish it with `raidlab grow --continue` (same members) before another change; nothing was changed".into(),
            ));
        }
        Ok(())
    }

    /// Hot spares the array has now.
    pub(crate) fn spare_count(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.state == MemberState::Spare)
            .count()
    }

    /// The newest superblock of a member in service.
    fn grow_template(&self) -> Result<Superblock> {
        self.members
            .iter()
            .filter(|m| m.is_live())
            .max_by_key(|m| m.sb.events)
            .map(|m| m.sb.clone())
            .ok_or_else(|| Error::invalid("no member in service to take the array's settings from"))
    }

    /// Change how much of each member the array uses (md's component size,
    /// `mdadm --grow --size`). `Max` takes the most every member in service
    /// (spares too, as md counts them) has room for after its data offset
    /// (metadata 1.0: before the superblock at the member's end, with md's
    /// room for a bitmap and a bad block log before it). Striped
    /// levels round down to a whole chunk; a RAID 10 further to what md
    /// keeps of it (md's `calc_sectors`, as `Geometry::new` rounds it: whole
    /// rows of the offset layout, whole chunks of the array). Growing marks the new
    /// space for resync as md does (resync_offset at the old size, the
    /// bitmap's new chunks dirty), unless `assume_clean`; shrinking keeps
    /// what lies past the new end on the members (growing back brings it
    /// back), as md.
    ///
    /// Refused with md's reason for RAID 0 and linear (they always use all
    /// of each member), a RAID 10 in the far layout or mid-reshape, a size
    /// larger than a member holds, a size below one chunk (one row of a
    /// RAID 10), a RAID 4/5/6 with a write journal or a PPL (md's
    /// `raid5_resize`). A metadata 0.90 member holds data from its start up
    /// to its superblock, at most 4 TiB (md's `super_90_load`). Refused
    /// while a rebuild is pending, while a resync is pending, and on a
    /// degraded array (raidlab's own rule: the new space could not be
    /// resynced).
    pub fn grow_size(&mut self, req: SizeRequest, assume_clean: bool) -> Result<SizeChange> {
        self.resize_members(req, assume_clean, None)
    }

    /// [`Assembly::grow_size`] of an array that serves (`live`, with the
    /// requests held) and exposes `exposed` bytes to its clients (less
    /// than it holds after md's `--array-size`): the same checks and the
    /// same superblocks, and a size whose array would hold less than that
    /// refused before anything is written (md's `raid5_resize` with an
    /// external size), as the clients address all of it.
    pub(crate) fn grow_size_served(
        &mut self,
        req: SizeRequest,
        assume_clean: bool,
        exposed: u64,
    ) -> Result<SizeChange> {
        self.resize_members(req, assume_clean, Some(exposed))
    }

    /// md's refusal of a component size change while a log keeps the
    /// stripes (its `raid5_resize`: `raid5_has_log || raid5_has_ppl` gives
    /// -EINVAL, which mdadm reports as "Cannot set device size"). Checked
    /// before the array is opened for writing, as opening replays the log
    /// (or writes md's empty PPL header). Nothing is written.
    pub fn size_change_logs_check(&self) -> Result<()> {
        if !self.has_journal() && !self.has_ppl() {
            return Ok(());
        }
        let (what, undo) = if self.has_journal() {
            (
                "a write journal",
                "md has no way to take a journal off an array",
            )
        } else {
            (
                "a PPL",
                "switch it to a resync policy first (`--consistency-policy resync`), change the size, then back (`--consistency-policy ppl`)",
            )
        };
        Err(refused(format!(
            "the array keeps {what}, and md does not change the component size of a RAID 4/5/6 that has one (its raid5_resize refuses it; mdadm: \"Cannot set device size ... Invalid argument\"): {undo}; nothing was changed"
        )))
    }

    fn resize_members(
        &mut self,
        req: SizeRequest,
        assume_clean: bool,
        exposed: Option<u64>,
    ) -> Result<SizeChange> {
        let level = self.geometry.level;
        match level {
            Level::Raid0 => {
                return Err(refused(
                    "the component size of RAID 0 (and linear) cannot be changed: md always uses all of each member there (mdadm: \"Component size change is not supported for RAID0\"); nothing was changed".into(),
                ))
            }
            Level::Raid10 => self.raid10_resize_check()?,
            _ => {}
        }
        self.grow_check_idle("--size")?;
        let template = self.grow_template()?;
        self.size_change_logs_check()?;
        if !self.missing().is_empty() {
            return Err(refused(format!(
                "the array is degraded (role(s) {:?} missing): the new space could not be made consistent; add and rebuild the missing member(s) first; nothing was changed",
                self.missing()
            )));
        }
        if !self.consistent() {
            return Err(refused(
                "the array has a resync pending (not stopped cleanly, or a resync interrupted): run `raidlab resync` first, then grow; nothing was changed".into(),
            ));
        }
        let old = template.size;
        let chunk = u64::from(template.chunksize).max(1);
        // Each member's room for data, as md's rdev size change finds it:
        // from the device's size asked again, as md does, so a member
        // enlarged while the array was open (a served one) counts whole.
        let mut rooms = Vec::new();
        for m in self.members.iter().filter(|m| m.is_live()) {
            // Its error names the device and what it could not use.
            m.device.volume.refresh_size()?;
            rooms.push((
                m.device.path.clone(),
                data_room(&m.sb, m.device.volume.size())?,
            ));
        }
        let (tightest, room) = rooms
            .iter()
            .min_by_key(|(_, r)| r.sectors)
            .map(|(p, r)| (p.clone(), *r))
            .ok_or_else(|| Error::invalid("no member in service"))?;
        let mut new = match req {
            SizeRequest::Max => room.sectors,
            SizeRequest::Bytes(b) => {
                if b % 1024 != 0 {
                    return Err(Error::invalid(format!(
                        "--size {b} bytes is not a whole number of KiB (md's component size is counted in KiB)"
                    )));
                }
                let s = b / SECTOR;
                if s > room.sectors {
                    return Err(refused(format!(
                        "--size {b} bytes does not fit: {tightest} has room for {} bytes of data after its data offset; give a smaller size or `max`; nothing was changed",
                        room.sectors * SECTOR
                    )));
                }
                s
            }
        };
        if level != Level::Raid1 {
            new -= new % chunk;
        }
        if level == Level::Raid10 {
            // What md keeps of it (its calc_sectors): the geometry rounds
            // every RAID 10's component size so. It refuses nothing else
            // here: the array runs with this layout, chunk and members.
            let g = self.geometry;
            let kept = Geometry::new(g.level, g.layout, g.chunk_bytes, g.raid_disks, new * SECTOR)
                .map_or(0, |g| g.member_bytes / SECTOR);
            if kept == 0 {
                return Err(Error::invalid(format!(
                    "a component size of {} bytes is too small for this RAID 10: md keeps it in whole rows of {} bytes (a chunk, times the far copies in the offset layout); give at least one row",
                    new * SECTOR,
                    raid10::raid10_row_sectors(&template)? * SECTOR
                )));
            }
            new = kept;
        }
        if level != Level::Raid1 && new < chunk || new == 0 {
            return Err(Error::invalid(format!(
                "a component size of {} bytes is too small: it must be at least one chunk ({} bytes) (mdadm: \"component size must be larger than chunk size\")",
                new * SECTOR,
                chunk * SECTOR
            )));
        }
        let old_geometry = self.geometry;
        let mut change = SizeChange {
            old_member_bytes: old * SECTOR,
            new_member_bytes: new * SECTOR,
            old_array_bytes: old_geometry.array_bytes(),
            new_array_bytes: old_geometry.array_bytes(),
            resync_from: None,
            bitmap_chunks_marked: 0,
            tightest_member: tightest,
        };
        if new == old {
            return Ok(change);
        }
        let grown = new > old;
        let mut probe = template.clone();
        probe.size = new;
        let new_geometry = geometry_of(&probe)?;
        change.new_array_bytes = new_geometry.array_bytes();
        match exposed {
            Some(exposed) if change.new_array_bytes < exposed => {
                let fits = change.new_array_bytes / 1024;
                return Err(refused(format!(
                    "a component size of {} bytes (now {}) would cut the served array to {} bytes, less than the {exposed} bytes its clients address (mdadm: \"this change will reduce the size of the array. use --grow --array-size first to truncate array\"): shrink what the array holds (the file system) to {fits} KiB or less, then give `--array-size {fits}K` (alone first, or with this --size); nothing was changed",
                    new * SECTOR,
                    old * SECTOR,
                    change.new_array_bytes
                )));
            }
            _ => {}
        }
        // Everything is computed before anything is written: each member's
        // new superblock fields and the resized bitmap.
        let mut per_member = Vec::new();
        for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.is_live()) {
            let r = data_room(&m.sb, m.device.volume.size())?;
            let mut sb = m.sb.clone();
            if grown {
                // md records what it was asked for: all the room for
                // `max`, else the size itself.
                sb.data_size = match req {
                    SizeRequest::Max => r.sectors,
                    SizeRequest::Bytes(_) => new,
                };
                if let Some(at) = r.super_offset.filter(|&at| at != sb.super_offset) {
                    // Assembly finds a 1.0 superblock only at the member's
                    // end, where md's size change puts it too: one found
                    // elsewhere is not this function's to move.
                    return Err(refused(format!(
                        "{}: its metadata 1.0 superblock is at sector {}, not at the member's end ({at}); nothing was changed",
                        m.device.path, sb.super_offset
                    )));
                }
            }
            sb.size = new;
            per_member.push((i, sb));
        }
        let bitmap = match &self.bitmap {
            Some(b) => {
                let (_, sb) = per_member
                    .iter()
                    .find(|(i, _)| self.slots.contains(&Some(*i)))
                    .ok_or_else(|| Error::invalid("no active member for the bitmap"))?;
                let room = raidlab_md::bitmap::room_bytes(sb)?;
                let mut nb = raidlab_md::bitmap::resized(b, sb, room, grown && !assume_clean)?;
                for (_, sb) in &per_member {
                    let r = raidlab_md::bitmap::room_bytes(sb)?;
                    if nb.sb.area_bytes() > r {
                        return Err(refused(format!(
                            "the bitmap of the new size ({} bytes) does not fit its room on a member ({r} bytes); remove it (--bitmap none), grow, then add it again; nothing was changed",
                            nb.sb.area_bytes()
                        )));
                    }
                }
                if grown && !assume_clean {
                    // The old bitmap's own extent, not the old component
                    // size: a RAID 10's bitmap counts array sectors.
                    let first = nb.chunk_of(b.sb.sync_size);
                    change.bitmap_chunks_marked =
                        (first..nb.chunks()).filter(|&c| nb.is_dirty(c)).count() as u64;
                }
                nb.sb.events_cleared = b.sb.events_cleared;
                Some(nb)
            }
            None => None,
        };
        for (i, sb) in per_member {
            self.members[i].sb = sb;
        }
        self.bitmap = bitmap;
        // md's resync checkpoint is in the unit its resync walks: member
        // sectors for parity levels, array sectors for mirrors
        // (`raid10_resize` sets it to the old array size; RAID 1's are equal).
        let resync_at = if grown && !assume_clean {
            change.resync_from = Some(old * SECTOR);
            if old_geometry.is_parity() {
                old
            } else {
                old_geometry.array_bytes() / SECTOR
            }
        } else {
            raidlab_md::superblock::MAX_SECTOR
        };
        self.commit(|sb| sb.resync_offset = resync_at)?;
        self.geometry = new_geometry;
        Ok(change)
    }
}

/// The most a metadata 0.90 member holds for a RAID level (md's
/// `super_90_load`: 4 TiB less 1 KiB, so that the KiB count fits 32 bits).
const SB090_MOST_SECTORS: u64 = (2 << 32) - 2;

/// A member's room for data as md's size change finds it, and where its
/// superblock goes (metadata 1.0: to the member's end, as md moves it).
#[derive(Debug, Clone, Copy)]
struct Room {
    sectors: u64,
    super_offset: Option<u64>,
}

/// Sectors a member has for data after its data offset (what `--size max`
/// would give it), as md's size change finds them.
pub(super) fn data_room_sectors(sb: &Superblock, dev_bytes: u64) -> Result<u64> {
    Ok(data_room(sb, dev_bytes)?.sectors)
}

fn data_room(sb: &Superblock, dev_bytes: u64) -> Result<Room> {
    let dev = dev_bytes / SECTOR;
    if sb.version() == MetadataVersion::V0_90 {
        // The data from the device's start up to the superblock where it
        // is (md finds a 0.90 one only at the end of the device as it was
        // when written, and never moves it: a device grown since does not
        // count), at most what its 32-bit KiB field records (md's 4 TiB
        // limit for a RAID level, `super_90_load`).
        return Ok(Room {
            sectors: sb.super_offset.min(SB090_MOST_SECTORS),
            super_offset: None,
        });
    }
    if sb.data_offset > sb.super_offset {
        return Ok(Room {
            sectors: dev.saturating_sub(sb.data_offset),
            super_offset: None,
        });
    }
    // Metadata 1.0: the superblock moves to the new end; md keeps room
    // before it for a bitmap and a bad block log.
    let at = MetadataVersion::V1_0
        .super_offset(dev)
        .ok_or_else(|| Error::invalid("member too small for a metadata 1.0 superblock"))?;
    let mut end = at.saturating_sub(raidlab_md::bitmap::choose_bm_space(dev) + 8);
    if sb.feature_map & feature::BITMAP_OFFSET != 0 && sb.bitmap_offset < 0 {
        end = end.min(at.saturating_sub(u64::from(sb.bitmap_offset.unsigned_abs())));
    }
    if sb.bblog_size != 0 && sb.bblog_offset < 0 {
        end = end.min(at.saturating_sub(u64::from(sb.bblog_offset.unsigned_abs())));
    }
    if sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
        // The PPL of a 1.0 member sits before its superblock too.
        let ppl_off = (sb.bitmap_offset & 0xffff) as u16 as i16;
        if ppl_off < 0 {
            end = end.min(at.saturating_sub(u64::from(ppl_off.unsigned_abs())));
        }
    }
    Ok(Room {
        sectors: end.saturating_sub(sb.data_offset),
        super_offset: Some(at),
    })
}
