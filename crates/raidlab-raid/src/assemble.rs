//! From member devices to a running array, and from nothing to a new array.
//!
//! Assembly reads each member's md superblock (1.0, 1.1, 1.2; 0.90 as its v1 equivalent), checks that they belong to one
//! array and agree on its shape, places each by its role, and sets aside members
//! that are stale (a lower event count than the newest), spares and faulty ones.
//! Creation chooses sizes and the data offset the way mdadm does and writes one
//! superblock per member. Neither ever writes data.

use crate::array::Array;
use raidlab_core::{Error, ErrorKind, Op, Result, SliceVolume, Volume};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::bitmap::Bitmap;
use raidlab_md::{MetadataVersion, NewArray, Role, Superblock};
use serde::Serialize;
use std::sync::Arc;

/// Forget how far a member's rebuild got: it starts over from the beginning.
fn restart_rebuild(sb: &mut Superblock) {
    if sb.feature_map & raidlab_md::superblock::feature::RECOVERY_OFFSET != 0 {
        sb.recovery_offset = 0;
    }
}

const SECTOR: u64 = 512;

/// One device handed to assembly or creation.
#[derive(Clone)]
pub struct Device {
    /// As the user named it.
    pub path: String,
    pub volume: Arc<dyn Volume>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path)
    }
}

/// What a member is to the assembled array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberState {
    /// In its slot and up to date.
    Active,
    /// A hot spare.
    Spare,
    /// Marked faulty in the newest superblocks.
    Faulty,
    /// Its own superblock claims a role, but its event count is behind the
    /// array's and the newest superblocks still give its device that role (or
    /// another member's): it missed writes, so its data is out of date.
    Stale,
    /// Its own superblock claims a role, but the array's newest superblocks
    /// record its device as removed (md's `--remove`: role 0xffff): it left the
    /// array and missed every write since. Like a stale member, never used and
    /// never written; `add` takes it back with a rebuild.
    Removed,
    /// Being rebuilt into its slot: valid only below its recovery offset, so it
    /// serves no reads until the rebuild completes.
    Rebuilding,
    /// Being copied from the active member of its slot (md's replace), which keeps
    /// serving until the copy completes and this member takes its place.
    Replacing,
    /// The array's write journal device (md's role 0xfffd), up to date.
    Journal,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub device: Device,
    pub sb: Superblock,
    pub state: MemberState,
    /// Slot for active (and stale) members.
    pub role: Option<usize>,
}

/// Overall state, as `detail` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrayState {
    Clean,
    Degraded,
    Failed,
}

/// An array put together from its members' superblocks.
#[derive(Debug)]
pub struct Assembly {
    pub geometry: Geometry,
    pub uuid: [u8; 16],
    pub name: String,
    pub members: Vec<Member>,
    /// Index into `members` of the active member in each slot.
    pub slots: Vec<Option<usize>>,
    /// The newest event count among the members.
    pub events: u64,
    /// md's internal write-intent bitmap, when the array has one. A bitmap older
    /// than the superblocks is not trusted: every chunk counts as dirty.
    pub bitmap: Option<Bitmap>,
    /// The started write journal, until an array takes it (see
    /// [`Assembly::start_journal`]).
    journal_handle: std::sync::Mutex<Option<Arc<crate::journal::Journal>>>,
}

impl Clone for Assembly {
    /// A copy sharing the member devices (a scrub of a running array works on
    /// one, so the original stays free for `detail` and membership changes).
    fn clone(&self) -> Self {
        Assembly {
            geometry: self.geometry,
            uuid: self.uuid,
            name: self.name.clone(),
            members: self.members.clone(),
            slots: self.slots.clone(),
            events: self.events,
            bitmap: self.bitmap.clone(),
            journal_handle: std::sync::Mutex::new(
                self.journal_handle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
        }
    }
}

impl Assembly {
    /// Read the superblocks of `devices` (in any order) and put the array together.
    pub fn assemble(devices: Vec<Device>) -> Result<Assembly> {
        if devices.is_empty() {
            return Err(Error::invalid(
                "no members given: name the member files or devices of the array",
            ));
        }
        let mut found = Vec::new();
        for d in devices {
            match Superblock::read_from(d.volume.as_ref()).map_err(|e| e.on_device(&d.path))? {
                Some(sb) => found.push((d, sb)),
                None => {
                    return Err(Error::invalid(format!(
                        "{} carries no md superblock (looked for metadata 0.90 and 1.0 near the end, 1.1 at the start, 1.2 4 KiB in): it is not an array member, or the array uses another metadata version",
                        d.path
                    ))
                    .on_device(d.path.clone()))
                }
            }
        }
        let newest = found
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, sb))| sb.events)
            .map(|(i, _)| i)
            .unwrap_or(0);
        let reference = found[newest].1.clone();
        for (d, sb) in &found {
            if sb.set_uuid != reference.set_uuid {
                return Err(Error::invalid(format!(
                    "{} belongs to array {} but {} belongs to array {}: give the members of one array only",
                    d.path,
                    format_uuid(&sb.set_uuid),
                    found[newest].0.path,
                    format_uuid(&reference.set_uuid)
                )));
            }
        }
        let mut seen: Vec<([u8; 16], &str)> = Vec::new();
        for (d, sb) in &found {
            if let Some((_, other)) = seen.iter().find(|(u, _)| *u == sb.device_uuid) {
                return Err(Error::invalid(format!(
                    "{} and {} are the same member (device UUID {}): give each member once",
                    other,
                    d.path,
                    format_uuid(&sb.device_uuid)
                )));
            }
            seen.push((sb.device_uuid, &d.path));
        }
        let geometry =
            geometry_of(&reference).map_err(|e| e.on_device(found[newest].0.path.clone()))?;
        let mut slots: Vec<Option<usize>> = vec![None; geometry.raid_disks];
        let mut members = Vec::new();
        for (d, sb) in found {
            let (mut state, role) = member_state(&reference, &sb);
            if state == MemberState::Active
                && sb.feature_map & raidlab_md::superblock::feature::REPLACEMENT != 0
            {
                state = MemberState::Replacing;
            } else if state == MemberState::Active
                && sb.feature_map & raidlab_md::superblock::feature::RECOVERY_OFFSET != 0
            {
                state = MemberState::Rebuilding;
            }
            if let Some(r) = role.filter(|&r| r < geometry.raid_disks) {
                if state == MemberState::Active {
                    if let Some(prev) = slots[r] {
                        let other: &Member = &members[prev];
                        return Err(Error::invalid(format!(
                            "{} and {} both claim slot {r}: the superblocks are inconsistent; examine them and give one",
                            other.device.path, d.path
                        )));
                    }
                    let data_end = (sb.data_offset + sb.size) * SECTOR;
                    if d.volume.size() < data_end {
                        return Err(Error::invalid(format!(
                            "member is {} bytes but its superblock says its data ends at byte {data_end}: the image is truncated",
                            d.volume.size()
                        ))
                        .on_device(d.path.clone()));
                    }
                    slots[r] = Some(members.len());
                }
            }
            members.push(Member {
                device: d,
                sb,
                state,
                role,
            });
        }
        // md writes one role table to every device it keeps current; a live
        // member whose own copy is older (a spare md did not write) must not
        // carry that old table into the next superblock write.
        for m in members.iter_mut().filter(|m| m.is_live()) {
            m.sb.max_dev = reference.max_dev;
            m.sb.dev_roles = reference.dev_roles.clone();
        }
        let bitmap = match slots.iter().flatten().next() {
            Some(&i)
                if reference.feature_map & raidlab_md::superblock::feature::BITMAP_OFFSET != 0 =>
            {
                let m: &Member = &members[i];
                let mut bm = Bitmap::read_from(m.device.volume.as_ref(), &m.sb)
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                if let Some(b) = bm.as_mut().filter(|b| b.is_stale(&reference)) {
                    // md: an out-of-date bitmap means a full resync.
                    for c in 0..b.chunks() {
                        let _ = b.set(c);
                    }
                }
                bm
            }
            _ => None,
        };
        let asm = Assembly {
            geometry,
            uuid: reference.set_uuid,
            name: reference.set_name.clone(),
            members,
            slots,
            events: reference.events,
            bitmap,
            journal_handle: std::sync::Mutex::new(None),
        };
        // Linear and multi-zone RAID 0: refuse sizes md would not run.
        crate::zoned::check_zones(&asm)?;
        Ok(asm)
    }

    /// Slots with no up-to-date member.
    pub fn missing(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&r| self.slots[r].is_none())
            .collect()
    }

    pub fn state(&self) -> ArrayState {
        let missing = self.missing();
        if !self.geometry.survives(&missing) {
            ArrayState::Failed
        } else if missing.is_empty() {
            ArrayState::Clean
        } else {
            ArrayState::Degraded
        }
    }

    /// Refuse to run an array that cannot serve its data, or one that is degraded
    /// *and* was not stopped cleanly: its parity may not match its data, so what
    /// it rebuilds for the missing member may be wrong (md's "dirty degraded"
    /// refusal). `force` accepts that risk. With a write journal: refused when
    /// the journal device is missing or stale (mdadm's refusal; with `force` the
    /// array runs read-only), and a degraded read is refused while the journal
    /// holds writes the members do not have yet (see
    /// [`Assembly::journal_unreplayed`]); a dirty superblock never happens.
    pub fn check_startable(&self, force: bool) -> Result<()> {
        let missing = self.missing();
        if self.has_journal() && self.journal_member().is_none() && !force {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Open,
                "refusing to start: the array has a write journal (md's JOURNAL feature) but its journal device is missing or stale, so writes it holds may be lost and stripes may be torn (mdadm: \"Not safe to assemble with missing or stale journal device\"). Give the journal device with the members; --force opens the array read-only without it",
            ));
        }
        match self.state() {
            ArrayState::Failed => Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Open,
                format!(
                    "cannot start {}: role(s) {missing:?} are missing or stale, more than it can do without; give the missing members",
                    self.geometry.level.name()
                ),
            )),
            ArrayState::Degraded
                if !force
                    && self.journal_unreplayed()? > 0 =>
            {
                Err(Error::new(
                    ErrorKind::Unrecoverable,
                    Op::Open,
                    format!(
                        "refusing to read: the array is degraded (role(s) {missing:?} missing) and its write journal holds writes not yet replayed (an unclean stop), so data rebuilt for the missing member(s) may be wrong. Open it for writing once (e.g. `raidlab resync` with these members and the journal) to replay the journal; --force reads it anyway"
                    ),
                ))
            }
            // Only parity levels have a write hole; md starts mirrors regardless.
            ArrayState::Degraded if self.geometry.is_parity() && !self.in_sync() && !force => Err(Error::new(
                ErrorKind::Refused,
                Op::Open,
                if self.logs_partial_parity() {
                    format!(
                        "refusing to read: the array is degraded (role(s) {missing:?} missing) and was not shut down cleanly, and its partial parity log has not been replayed yet, so data rebuilt for the missing member(s) may be wrong. `raidlab resync` with these members replays the log (a few seconds) and makes it safe; --force reads it anyway"
                    )
                } else {
                    let set_aside: Vec<String> = self
                        .members
                        .iter()
                        .filter(|m| {
                            matches!(m.state, MemberState::Stale | MemberState::Removed)
                                && m.role.is_some_and(|r| missing.contains(&r))
                        })
                        .map(|m| format!("{} is out of date ({:?})", m.device.path, m.state).to_lowercase())
                        .collect();
                    let given = if set_aside.is_empty() {
                        "if you have the missing member(s), give them with the others; otherwise ".to_string()
                    } else {
                        format!("{} and cannot fill its role; ", set_aside.join(", "))
                    };
                    format!(
                        "refusing to start: the array is degraded (role(s) {missing:?} missing) and was not shut down cleanly, so parity may not match the data and data rebuilt for the missing member(s) may be silently wrong (md's \"dirty degraded\" refusal). {given}--force starts it anyway (to read it, or to add a member and `rebuild --force` it)"
                    )
                },
            )),
            _ => Ok(()),
        }
    }

    /// Whether the newest superblock says parity/mirrors are consistent.
    pub fn in_sync(&self) -> bool {
        self.newest().is_clean()
    }

    fn newest(&self) -> &Superblock {
        self.members
            .iter()
            .map(|m| &m.sb)
            .max_by_key(|sb| sb.events)
            .unwrap_or(&self.members[0].sb)
    }

    /// The running array over the active members' data areas.
    pub fn array(&self) -> Result<Array> {
        if let Some(zones) = self.zone_map() {
            return self.zoned_array(zones?);
        }
        let vols = self
            .slots
            .iter()
            .map(|slot| slot.map(|i| self.area(i)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let label = if self.name.is_empty() {
            format_uuid(&self.uuid)
        } else {
            self.name.clone()
        };
        let array = Array::new(format!("array {label}"), self.geometry, vols)?;
        let array = if self.logs_partial_parity() {
            array.with_ppl(self.partial_parity_log()?)?
        } else {
            array
        };
        let array = if !self.has_journal() {
            array
        } else if self.journal_member().is_none() {
            // md runs an array whose journal is gone read-only.
            array.read_only()
        } else {
            let journal = self
                .journal_handle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            match journal {
                Some(j) => array.with_journal(j)?,
                // Not started (a read-only open): the members are read as they
                // are, and nothing may be written around the journal.
                None => array.read_only(),
            }
        };
        Ok(match &self.bitmap {
            Some(b) => {
                let devices = self
                    .slots
                    .iter()
                    .enumerate()
                    .filter_map(|(role, s)| s.map(|i| (role, i)))
                    .map(|(role, i)| {
                        (
                            role,
                            self.members[i].device.volume.clone(),
                            self.members[i].sb.clone(),
                        )
                    })
                    .collect();
                array.with_intent(b.clone(), devices)
            }
            None => array,
        })
    }

    /// Whether the array keeps md's write journal (consistency policy `journal`,
    /// a separate journal device).
    pub fn has_journal(&self) -> bool {
        self.newest().feature_map & raidlab_md::superblock::feature::JOURNAL != 0
            && self.geometry.is_parity()
    }

    /// Stripes a start of the journal would change on the members (0 once
    /// started, without a journal, or after a clean stop). Reads only.
    pub fn journal_unreplayed(&self) -> Result<u64> {
        let started = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        match self.journal_member() {
            Some(j) if self.has_journal() && !started => {
                let vols = self
                    .slots
                    .iter()
                    .map(|slot| slot.map(|i| self.area(i)).transpose())
                    .collect::<Result<Vec<_>>>()?;
                let plain = Array::new("array (journal check)", self.geometry, vols)?;
                crate::journal::unreplayed(j.device.volume.as_ref(), &j.sb, &self.uuid, &plain)
            }
            _ => Ok(0),
        }
    }

    /// The up-to-date journal device, if it was given.
    pub fn journal_member(&self) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.state == MemberState::Journal)
    }

    /// Start the write journal before the array is used, as md does at every
    /// start of an array with one: replay what the journal holds from
    /// `journal_tail` (stripes complete in it are written to the members again,
    /// which makes them consistent whatever a crash left), then begin a new log.
    /// The superblocks stay clean throughout (md's MD_JOURNAL_CLEAN): the
    /// journal, not a resync, is what makes an unclean stop safe, and a degraded
    /// array may start. `None` without a journal (or without its device: then
    /// the array runs read-only, after [`Assembly::check_startable`] with force).
    pub fn start_journal(&mut self) -> Result<Option<crate::journal::JournalReplay>> {
        if !self.has_journal() {
            return Ok(None);
        }
        let Some(jm) = self.journal_member() else {
            return Ok(None);
        };
        let (device, sb) = (jm.device.volume.clone(), jm.sb.clone());
        let vols = self
            .slots
            .iter()
            .map(|slot| slot.map(|i| self.area(i)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let plain = Array::new("array (journal replay)", self.geometry, vols)?;
        let (journal, replay) =
            crate::journal::Journal::start(device, sb, self.geometry, &self.uuid, &plain)?;
        // Keep the journal device's superblock (its journal_tail moved) current
        // in the assembly, so later superblock writes do not move it back.
        let tail = journal.tail();
        for m in self
            .members
            .iter_mut()
            .filter(|m| m.state == MemberState::Journal)
        {
            raidlab_md::journal::set_journal_tail(&mut m.sb, tail);
        }
        *self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(journal));
        if replay.replayed_anything() && self.partly_rebuilt() {
            // The replay wrote the members in service only: a member being
            // rebuilt may lack writes that were in flight at the crash, below
            // its checkpoint. Its rebuild starts over.
            self.commit(restart_rebuild)?;
        }
        Ok(Some(replay))
    }

    /// Whether a member being rebuilt (or replacing another) has a checkpoint
    /// past its start.
    fn partly_rebuilt(&self) -> bool {
        self.members.iter().any(|m| {
            matches!(m.state, MemberState::Rebuilding | MemberState::Replacing)
                && m.sb.recovery_offset != 0
        })
    }

    /// Whether the array keeps md's partial parity log (consistency policy
    /// `ppl`). md runs it for RAID 5; other levels ignore the flag.
    pub fn has_ppl(&self) -> bool {
        use raidlab_md::superblock::feature;
        // md records one or the other: MULTIPLE_PPLS once it has used an area with
        // room for several log writes.
        self.newest().feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0
    }

    /// Whether writes go through the partial parity log.
    pub fn logs_partial_parity(&self) -> bool {
        self.has_ppl() && self.geometry.level == Level::Raid5
    }

    fn ppl_members(&self) -> Vec<(usize, Arc<dyn Volume>, Superblock)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(r, s)| s.map(|i| (r, i)))
            .map(|(r, i)| {
                let m = &self.members[i];
                (r, m.device.volume.clone(), m.sb.clone())
            })
            .collect()
    }

    fn partial_parity_log(&self) -> Result<crate::ppl::PartialParityLog> {
        let mut by_role: Vec<Option<(Arc<dyn Volume>, Superblock)>> =
            vec![None; self.geometry.raid_disks];
        for (r, dev, sb) in self.ppl_members() {
            by_role[r] = Some((dev, sb));
        }
        crate::ppl::PartialParityLog::new(raidlab_md::ppl::signature(&self.uuid), by_role)
    }

    /// Start the partial parity log before writing, as md does when it starts an
    /// array with one: after an unclean stop, replay each member's log (parity of
    /// the rows being written at the crash is recomputed from the partial parity
    /// and the data), then start every log afresh (zeroed, an empty header) and,
    /// when every log checked out, record the array as clean: no resync needed.
    /// Returns what the replay did (`None` when there was nothing to replay: a
    /// clean array, or one without a log).
    pub fn start_ppl(&mut self) -> Result<Option<crate::ppl::PplReplay>> {
        if !self.logs_partial_parity() {
            return Ok(None);
        }
        let members = self.ppl_members();
        let replay = if self.in_sync() {
            None
        } else {
            // The replay writes parity directly: it runs on the array without logs.
            let vols = self
                .slots
                .iter()
                .map(|slot| slot.map(|i| self.area(i)).transpose())
                .collect::<Result<Vec<_>>>()?;
            let plain = Array::new("array (PPL replay)", self.geometry, vols)?;
            let r = crate::ppl::replay(&plain, &members, raidlab_md::ppl::signature(&self.uuid))?;
            plain.flush()?;
            Some(r)
        };
        for (_, dev, sb) in &members {
            let area = raidlab_md::ppl::initial_area(sb).map_err(|e| e.on_device(dev.name()))?;
            raidlab_md::ppl::write_area(dev.as_ref(), sb, 0, &area)
                .map_err(|e| e.on_device(dev.name()))?;
        }
        if let Some(r) = &replay {
            // The replay fixed parity of the members in service only: a member
            // being rebuilt may hold torn stripes below its checkpoint. Its
            // rebuild starts over.
            let clean = r.mismatches == 0;
            if clean || self.partly_rebuilt() {
                self.commit(|sb| {
                    if clean {
                        sb.resync_offset = u64::MAX;
                    }
                    restart_rebuild(sb);
                })?;
            }
        }
        Ok(replay)
    }

    /// Take back the bitmap a running array updated (so the next superblock write
    /// carries its dirty bits).
    pub fn absorb_bitmap(&mut self, array: &Array) {
        if let Some(b) = array.intent_bitmap() {
            self.bitmap = Some(b);
        }
    }

    /// Record in every active member's superblock that writes are in flight (md's
    /// "active" state: resync_offset 0), so a crash before [`Assembly::mark_clean`]
    /// is seen as an unclean stop. Keeps the previous sync state to restore later.
    pub fn mark_dirty(&mut self) -> Result<bool> {
        let was_clean = self.in_sync();
        if self.geometry.level == Level::Raid0 {
            // Nothing to resync without redundancy: md never marks RAID 0 dirty.
            return Ok(was_clean);
        }
        // A member being rebuilt does not receive the writes to come: what it
        // has rebuilt so far can no longer be trusted, so its rebuild starts
        // over (a live rebuild resumes from the offsets read before this).
        if self.has_journal() && self.journal_member().is_some() && was_clean {
            // md keeps a journaled array's superblocks clean while it runs
            // (MD_JOURNAL_CLEAN): after a crash the journal replay, not a resync,
            // makes the stripes consistent.
            if self.partly_rebuilt() {
                self.commit(restart_rebuild)?;
            }
            return Ok(was_clean);
        }
        self.commit(|sb| {
            sb.resync_offset = 0;
            restart_rebuild(sb);
        })?;
        Ok(was_clean)
    }

    /// After a flush: record a clean stop (if the array was in sync before).
    /// With a started journal, it is emptied first (members flushed, the tail
    /// moved past everything logged).
    pub fn mark_clean(&mut self, was_clean: bool) -> Result<()> {
        let journal = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(j) = journal {
            let vols: Vec<Arc<dyn Volume>> = self
                .slots
                .iter()
                .flatten()
                .map(|&i| self.members[i].device.volume.clone())
                .collect();
            j.checkpoint(&|| vols.iter().try_for_each(|v| v.flush()))?;
        }
        if let Some(b) = self.bitmap.as_mut() {
            // Everything written has been flushed: no region is dirty any more.
            if was_clean {
                b.clear_all();
                b.sb.events_cleared = self.events + 1;
            }
        }
        self.commit(|sb| {
            if was_clean {
                sb.resync_offset = u64::MAX;
            }
        })
    }

    /// Apply an array-wide change to the superblock of every live member (active,
    /// being rebuilt, spare), with the event count raised by one, and write them.
    /// Faulty and stale members are left alone, as md never writes them.
    pub fn commit(&mut self, f: impl Fn(&mut Superblock)) -> Result<()> {
        let now = now_secs();
        let events = self.events + 1;
        if let Some(b) = self.bitmap.as_mut() {
            // md keeps the bitmap's event count with the superblock's; a bitmap
            // behind it would be taken as stale (full resync).
            b.sb.events = events;
        }
        let journal = self
            .journal_handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for m in self.members.iter_mut().filter(|m| m.is_live()) {
            m.sb.events = events;
            m.sb.utime = now;
            f(&mut m.sb);
            if let (MemberState::Journal, Some(j)) = (m.state, &journal) {
                // The running journal owns its superblock's journal_tail; the
                // rest (events, role table) is the assembly's.
                m.sb = j
                    .write_superblock(m.sb.clone())
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                continue;
            }
            m.sb.write_to(m.device.volume.as_ref())
                .map_err(|e| e.on_device(m.device.path.clone()))?;
            if let Some(b) = &self.bitmap {
                b.write_to(m.device.volume.as_ref(), &m.sb)
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
            }
            m.device.volume.flush()?;
        }
        self.events = events;
        Ok(())
    }

    /// Set the role of device number `dev_number` in every live superblock's
    /// role table (the change itself is written by [`Assembly::commit`]).
    pub fn set_role(&mut self, dev_number: u32, raw_role: u16) {
        for m in self.members.iter_mut().filter(|m| m.is_live()) {
            if let Some(r) = m.sb.dev_roles.get_mut(dev_number as usize) {
                *r = raw_role;
            }
        }
    }

    /// The data area of member `index` (of `members`).
    pub fn area(&self, index: usize) -> Result<Arc<dyn Volume>> {
        let m = &self.members[index];
        let area = SliceVolume::new(
            m.device.volume.clone(),
            m.sb.data_offset * SECTOR,
            self.geometry.member_bytes,
        )?;
        Ok(Arc::new(area))
    }
}

impl Member {
    /// Whether md would keep this member's superblock current.
    pub fn is_live(&self) -> bool {
        matches!(
            self.state,
            MemberState::Active
                | MemberState::Rebuilding
                | MemberState::Replacing
                | MemberState::Spare
                | MemberState::Journal
        )
    }
}

/// What a member is to the array, judged as md judges it: by its own
/// superblock first. A member whose own superblock claims a role (active,
/// replacing, journal) but whose event count is behind the newest missed
/// writes, whatever the newest superblock's role table now says of its device
/// number: stale while the array still lists it (or that number was given to
/// another device), faulty where md marked it failed, removed where md took it
/// out (0xffff). Only a member that is up to date, or that claims no role (a
/// spare needs no event count), takes its role from the newest superblock.
/// Returns the state and the slot: the slot the member serves, or for a member
/// set aside, the slot its own superblock claims (for the report only).
fn member_state(reference: &Superblock, sb: &Superblock) -> (MemberState, Option<usize>) {
    let journal_feature = reference.feature_map & raidlab_md::superblock::feature::JOURNAL != 0;
    let own = sb.role();
    // A device whose own superblock says faulty is never taken for a spare.
    let claims_role = matches!(
        own,
        Role::Active(_) | Role::Replacement(_) | Role::Journal | Role::Faulty
    );
    let in_reference = reference_role(reference, sb);
    if sb.events < reference.events && claims_role {
        let claimed = match own {
            Role::Active(r) | Role::Replacement(r) => Some(r as usize),
            _ => None,
        };
        let state = match in_reference {
            Role::Faulty => MemberState::Faulty,
            Role::Spare | Role::Unknown => MemberState::Removed,
            // A journal behind the array may lack writes the members have: md
            // and mdadm call it stale and will not use it.
            Role::Active(_) | Role::Replacement(_) | Role::Journal => MemberState::Stale,
        };
        return (state, claimed);
    }
    let slot = match in_reference {
        Role::Active(r) => Some(r as usize),
        _ => None,
    };
    let state = match in_reference {
        Role::Active(_) => MemberState::Active,
        Role::Spare => MemberState::Spare,
        // md ignores a journal device of an array without the feature.
        Role::Journal if journal_feature => MemberState::Journal,
        _ => MemberState::Faulty,
    };
    (state, slot)
}

/// The role `sb`'s device has in the array according to the newest superblock.
fn reference_role(reference: &Superblock, sb: &Superblock) -> Role {
    match reference.dev_roles.get(sb.dev_number as usize) {
        Some(&r) => role_from_raw(r),
        None => sb.role(),
    }
}

fn role_from_raw(r: u16) -> Role {
    match r {
        raidlab_md::ROLE_SPARE => Role::Spare,
        raidlab_md::ROLE_FAULTY => Role::Faulty,
        raidlab_md::ROLE_JOURNAL => Role::Journal,
        n => Role::Active(n),
    }
}

/// The geometry a superblock describes.
pub fn geometry_of(sb: &Superblock) -> Result<Geometry> {
    // md sizes RAID 0 from each member's data_size (rounded to a chunk), the other
    // levels from the array-wide `size` field.
    if sb.level == raidlab_layout::zones::MD_LEVEL_LINEAR {
        return crate::zoned::placeholder_geometry(sb);
    }
    let member_sectors = if sb.level == 0 { sb.data_size } else { sb.size };
    Geometry::from_md(
        sb.level,
        sb.layout,
        sb.chunksize,
        sb.raid_disks,
        member_sectors,
    )
}

pub fn format_uuid(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}:{}:{}:{}", &h[0..8], &h[8..16], &h[16..24], &h[24..32])
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

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

/// A device for `create`, and whether it is known to hold nothing but zeros in the
/// area the array will use (a fresh sparse file), so no initial resync is needed.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub device: Device,
    pub zeroed: bool,
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
    if version == MetadataVersion::V0_90 {
        return Err(Error::invalid(
            "metadata 0.90 is read by raidlab but not written: create with metadata 1.0 (also at the end of the members) instead",
        ));
    }
    if version == MetadataVersion::V1_0 && (journal.is_some() || spec.ppl) {
        return Err(Error::invalid(
            "metadata 1.0 with a partial parity log or a write journal is not built yet (md keeps them before the superblock at the end of each member): use metadata 1.1 or 1.2, or a bitmap or resync",
        ));
    }
    if let Some(j) = &journal {
        if !matches!(spec.level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
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
    for m in &members {
        if let Some(sb) = Superblock::read_from(m.device.volume.as_ref())
            .ok()
            .flatten()
        {
            if !spec.force {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Open,
                    format!(
                        "already carries an md superblock (array {}, {}, role {}): it may hold someone's data. Use --force to overwrite it",
                        format_uuid(&sb.set_uuid),
                        Level::from_md(sb.level).map_or_else(|_| format!("level {}", sb.level), |l| l.name().to_string()),
                        sb.dev_number
                    ),
                )
                .on_device(m.device.path.clone()));
            }
        }
        if !m.device.volume.is_writable() {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                Op::Open,
                "cannot write the superblock: opened read-only",
            )
            .on_device(m.device.path.clone()));
        }
    }
    let smallest = members
        .iter()
        .take(member_count)
        .map(|m| m.device.volume.size())
        .min()
        .unwrap_or(0);
    let chunk = if spec.level == Level::Raid1 {
        0
    } else {
        spec.chunk_bytes
    };
    if spec.ppl && spec.level != Level::Raid5 {
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
    let data_offset = if spec.ppl {
        raidlab_md::ppl::mdadm_ppl_data_offset(first, (chunk / 1024) as u32)
    } else {
        raidlab_md::mdadm_data_offset_for(version, first, (chunk / 1024) as u32)
    };
    let usable = smallest.saturating_sub(data_offset);
    let member_bytes = if data_offset >= smallest {
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
    let clean = zeroed || spec.level == Level::Raid0;
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
        if spec.level == Level::Raid0 {
            // md sizes RAID 0 from each member's data_size: make them equal so md
            // sees one zone, exactly the striping raidlab uses, on unequal members.
            sb.data_size = array.member_sectors;
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
        sb.write_to(m.device.volume.as_ref())
            .map_err(|e| e.on_device(m.device.path.clone()))?;
        if let Some(bm) = bitmap {
            bm.write_to(m.device.volume.as_ref(), &sb)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
        }
        if spec.ppl {
            let area = raidlab_md::ppl::initial_area(&sb)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
            raidlab_md::ppl::write_area(m.device.volume.as_ref(), &sb, 0, &area)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
        }
    }
    if let (Some(j), Some(m)) = (&journal_dev, members.last()) {
        // An empty log at the start of the ring, as md begins one.
        let sb = Superblock::read_from(j.volume.as_ref())
            .map_err(|e| e.on_device(j.path.clone()))?
            .ok_or_else(|| {
                Error::invalid("the journal's superblock did not read back")
                    .on_device(j.path.clone())
            })?;
        let seed = raidlab_md::journal::uuid_seed(&array.uuid);
        let empty = raidlab_md::journal::MetaBlock::empty(u64::from(seed), 0)
            .to_bytes(seed)
            .map_err(|e| e.on_device(j.path.clone()))?;
        raidlab_md::journal::write_blocks(m.device.volume.as_ref(), &sb, 0, &empty)?;
    }
    for m in &members {
        m.device.volume.flush()?;
    }
    Assembly::assemble(members.into_iter().map(|m| m.device).collect())
}
