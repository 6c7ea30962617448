//! From member devices to a running array, and from nothing to a new array.
//!
//! Assembly reads each member's md superblock (1.0, 1.1, 1.2; 0.90 as its v1 equivalent), checks that they belong to one
//! array and agree on its shape, places each by its role, and sets aside members
//! that are stale (a lower event count than the newest), spares and faulty ones.
//! Creation chooses sizes and the data offset the way mdadm does and writes one
//! superblock per member. Neither ever writes data.
//!
//! Split by decision: this file judges members and builds the array;
//! `logs` starts the write journal and the partial parity log (replaying what an
//! unclean stop left); `superblocks` writes the array's state back to every live
//! member; `new_member` refuses a device that may not become a member;
//! `create` makes a new array, `create_zoned` a linear or multi-zone
//! RAID 0 one; `reshape` reads an array md stopped mid-reshape.

mod bad_blocks;
mod bitmap_copy;
mod create;
mod create_zoned;
mod logs;
mod member_state;
mod new_member;
mod reshape;
mod superblocks;
mod zones;

pub use create::{
    create, create_placed, create_with_executor, create_with_journal, create_with_metadata,
    CreateSpec, Placement,
};
pub use create_zoned::{create_zoned, raid0_sizes_differ, ZonedSpec};
pub use new_member::NewMember;

use crate::array::Array;
use member_state::{caught_up, member_state};
use raidlab_core::{Error, ErrorKind, Op, Result, SliceVolume, Volume};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::bitmap::Bitmap;
use raidlab_md::{MetadataVersion, NewArray, Superblock};
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
    /// Carries out every plan of the assembly's own (superblock and bitmap
    /// commits, log starts and replays, offline rebuild, resync and scrub)
    /// and of the arrays it builds: the thread pool unless given another
    /// ([`Assembly::with_executor`]), so that a recording executor sees that
    /// I/O as it sees a running array's.
    executor: Arc<dyn crate::exec::Executor>,
    /// Device numbers of live members taken one event behind (md's margin):
    /// their superblocks on disk still say the older count until a commit
    /// writes them, which first brings them level ([`Assembly::commit`]).
    lagging: Vec<u32>,
    /// The superblocks' dirty mark is a served array's (md's "active" while
    /// writes are recent, `live`'s safe mode), not a resync owed: set by
    /// `live` only while the array is quiesced for a change, so the change
    /// may count the array as in sync ([`Assembly::consistent`]).
    active_in_service: bool,
    /// A stopped metadata 0.90 restripe's backup file was put back by this
    /// assembly (`grow::backup_file::read`): the window it held is whole in
    /// the members again, so the array may be read (md's assembly given
    /// `--backup-file`). Without it such an array is refused.
    pub(crate) backup_put_back: bool,
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
            executor: Arc::clone(&self.executor),
            lagging: self.lagging.clone(),
            active_in_service: self.active_in_service,
            backup_put_back: self.backup_put_back,
        }
    }
}

impl Assembly {
    /// Carry out the assembly's plans, and those of the arrays it builds
    /// from now on, with `executor` (a recording one: `raidlab explain`,
    /// tests; the torture harness's in-order one).
    pub fn with_executor(mut self, executor: Arc<dyn crate::exec::Executor>) -> Assembly {
        self.executor = executor;
        self
    }

    /// [`Assembly::with_executor`] in place.
    pub fn set_executor(&mut self, executor: Arc<dyn crate::exec::Executor>) {
        self.executor = executor;
    }

    /// What carries out the assembly's plans.
    pub fn executor(&self) -> &Arc<dyn crate::exec::Executor> {
        &self.executor
    }

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
        // Two devices with one device UUID: the same member given twice
        // (equal events), or an old copy of a member beside the member now
        // (0.90 derives its device UUID from the device number, which md
        // gives again to a device added after the first one left). As mdadm
        // keeps the device with the most events for a slot, the older copy
        // is superseded: assembled as stale, never used.
        let mut superseded = vec![false; found.len()];
        for i in 0..found.len() {
            for j in 0..i {
                let (a, b) = (&found[j], &found[i]);
                if a.1.device_uuid != b.1.device_uuid || superseded[j] {
                    continue;
                }
                if a.1.events == b.1.events {
                    return Err(Error::invalid(format!(
                        "{} and {} are the same member (device UUID {}): give each member once",
                        a.0.path,
                        b.0.path,
                        format_uuid(&b.1.device_uuid)
                    )));
                }
                superseded[if a.1.events < b.1.events { j } else { i }] = true;
            }
        }
        let geometry =
            geometry_of(&reference).map_err(|e| e.on_device(found[newest].0.path.clone()))?;
        let mut slots: Vec<Option<usize>> = vec![None; geometry.raid_disks];
        let mut members = Vec::new();
        let mut lagging = Vec::new();
        let mut missed_start = Vec::new();
        for ((d, sb), superseded) in found.into_iter().zip(superseded) {
            let (mut state, role) = member_state(&reference, &sb);
            if !superseded {
                if let Some(r) = member_state::missed_grow_start(&reference, &sb, state) {
                    missed_start.push((members.len(), r));
                }
            }
            // A spare behind the newest count is caught up too: md writes
            // every superblock it keeps current from the array's state
            // (`sync_super`), so its older array-wide fields (a grow's start
            // it missed, say) must not go out with the next commit's event
            // count, where the assembly after it could take them for the
            // newest and lose the reshape's record.
            let sb = if !superseded
                && sb.events < reference.events
                && matches!(
                    state,
                    MemberState::Active | MemberState::Journal | MemberState::Spare
                ) {
                lagging.push(sb.dev_number);
                caught_up(&reference, sb)
            } else {
                sb
            };
            if superseded {
                state = MemberState::Stale;
            } else if state == MemberState::Active
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
        // A spare the newest table puts in a slot (a rebuild whose start it
        // missed, see `member_state`) is listed as the spare it is.
        let spares: Vec<u32> = members
            .iter()
            .filter(|m| m.state == MemberState::Spare)
            .map(|m| m.sb.dev_number)
            .collect();
        for m in members.iter_mut().filter(|m| m.is_live()) {
            m.sb.max_dev = reference.max_dev;
            m.sb.dev_roles = reference.dev_roles.clone();
            for &d in &spares {
                if let Some(r) = m.sb.dev_roles.get_mut(d as usize) {
                    if *r < raidlab_md::ROLE_JOURNAL {
                        *r = raidlab_md::ROLE_SPARE;
                    }
                }
            }
        }
        let bitmap = bitmap_copy::assembled(&members, &slots, &reference)?;
        let mut asm = Assembly {
            geometry,
            uuid: reference.set_uuid,
            name: reference.set_name.clone(),
            members,
            slots,
            events: reference.events,
            bitmap,
            journal_handle: std::sync::Mutex::new(None),
            executor: Arc::new(crate::exec::ThreadPool::default()),
            lagging,
            active_in_service: false,
            backup_put_back: false,
        };
        // Linear and multi-zone RAID 0: refuse sizes md would not run; a
        // reshape whose fields make no geometry is refused here too.
        zones::check_zones(&asm)?;
        if let Some(Err(e)) = asm.reshape() {
            return Err(e);
        }
        asm.adopt_raid0_restripe_member();
        asm.adopt_roles_missed_at_start(&missed_start);
        asm.raid10_bitmap_fitted()?;
        Ok(asm)
    }

    /// The member (index into `members`) whose device an I/O error `e`
    /// names, if it is a device I/O error: each volume names itself in its
    /// errors, and a member is known by its path too.
    pub fn member_of_error(&self, e: &Error) -> Option<usize> {
        if e.kind != ErrorKind::Io {
            return None;
        }
        let device = e.device.as_deref()?;
        self.members
            .iter()
            .position(|m| m.device.path == device || m.device.volume.name() == device)
    }

    /// Slots with no up-to-date member.
    pub fn missing(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&r| self.slots[r].is_none())
            .collect()
    }

    /// Whether the array serves all its data with these roles missing: in
    /// its geometry and, mid-reshape, in both of the reshape's (as md's
    /// raid5_calc_degraded counts a reshaping array's degradation in the
    /// previous and the new member counts; a grow's new role missing counts
    /// in the new geometry only).
    pub fn survives(&self, missing: &[usize]) -> bool {
        let fits = |g: &Geometry| {
            let m: Vec<usize> = missing
                .iter()
                .copied()
                .filter(|&r| r < g.raid_disks)
                .collect();
            g.survives(&m)
        };
        fits(&self.geometry)
            && match self.reshape() {
                Some(Ok(r)) => fits(&r.old) && fits(&r.new),
                _ => true,
            }
    }

    pub fn state(&self) -> ArrayState {
        let missing = self.missing();
        if !self.survives(&missing) {
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
        let state = self.state();
        // A complete array reads its data members directly, which is right
        // after a crash in write-through mode (data reached the members
        // before the write was acknowledged) but not in write-back mode,
        // where acknowledged data may be in the journal only. A degraded
        // array is refused below for any unreplayed stripe.
        if state == ArrayState::Clean && self.has_journal() && !force {
            let held = self.journal_data_not_on_members()?;
            if held > 0 {
                return Err(Error::new(
                    ErrorKind::Refused,
                    Op::Open,
                    format!(
                        "refusing to read: the write journal holds data for {held} stripe row(s) that is not on the members yet (writes acknowledged in write-back mode, or in flight, before an unclean stop), so reading the members alone would return older data. Open it for writing once (e.g. `raidlab resync` with these members and the journal) to replay the journal; --force reads the members as they are; nothing was written"
                    ),
                ));
            }
        }
        match state {
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
            ArrayState::Degraded if crate::level::of(&self.geometry).write_hole && !self.in_sync() && !force => Err(Error::new(
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
    /// Asked when an owner starts the array, it is also whether a dirty mark
    /// made from then on is the owner's own: md's safe mode runs only on an
    /// array in sync when its owner starts serving it
    /// (`LiveArray::start_safe_mode`); a mark found at the start is an
    /// unclean stop's ([`Assembly::trusts_redundancy`] takes that answer).
    pub fn in_sync(&self) -> bool {
        self.newest().is_clean()
    }

    /// Whether parity and copies agree: in sync, or marked dirty only as a
    /// served array is while it takes writes, and quiesced now (every write
    /// done and flushed; `live` says so through
    /// [`Assembly::in_service`]).
    pub(crate) fn consistent(&self) -> bool {
        self.in_sync() || self.active_in_service
    }

    /// Run `f` on a quiesced served array (every write done and flushed) as
    /// its change sees it: `ours` says the superblocks' dirty mark is the
    /// owner's safe mode's (writes recent, none owed a resync), so
    /// `Assembly::consistent` counts it as in sync for `f` and for nothing
    /// after it. What the server's takeovers and restripe starts run
    /// through (`LiveArray`), and the simulation's.
    pub fn in_service<T>(&mut self, ours: bool, f: impl FnOnce(&mut Assembly) -> T) -> T {
        self.active_in_service = ours;
        let out = f(self);
        self.active_in_service = false;
        out
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
        if let Some(r) = self.reshape() {
            return self.reshape_array(r?);
        }
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
        let array = Array::new(format!("array {label}"), self.geometry, vols)?
            .with_executor(Arc::clone(&self.executor))
            .with_bad_blocks(self.bad_blocks()?)
            .with_bad_block_logs(self.bad_block_logs());
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
}

/// The geometry a superblock describes.
pub fn geometry_of(sb: &Superblock) -> Result<Geometry> {
    // md sizes RAID 0 from each member's data_size (rounded to a chunk), the other
    // levels from the array-wide `size` field (`Rules::sized_per_member`).
    if sb.level == raidlab_layout::zones::MD_LEVEL_LINEAR {
        return crate::zoned::placeholder_geometry(sb);
    }
    let member_sectors = if crate::zoned::sized_per_member(sb) {
        sb.data_size
    } else {
        sb.size
    };
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

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
