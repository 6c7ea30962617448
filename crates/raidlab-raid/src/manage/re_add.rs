//! md's re-add: whether a former member may go back into its old role with
//! only the chunks the write-intent bitmap marked while it was away to
//! rebuild, and taking it back so.
//!
//! What it decides: the refusals (md's reasons: not a former member holding
//! a role, no bitmap, events older than the bitmap's events_cleared, its role
//! taken now) and the member's state and events once back. It must never
//! write anything for a refused re-add, nor rebuild: the chunks are rebuilt
//! by `recovery`.

use super::*;

/// What a re-add found: the role the member goes back to and why it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReAdd {
    pub slot: usize,
    /// The member's own event count when it left.
    pub events: u64,
    /// The bitmap's events_cleared, which it is not older than.
    pub events_cleared: u64,
    /// The bitmap's dirty chunks: what its rebuild rewrites.
    pub dirty_chunks: u64,
}

impl Assembly {
    /// Whether `device` can be re-added (md's re-add) and how: checks only,
    /// nothing is written. Refused, with md's reason, for a device that is not
    /// a former member of this array holding a role, an array without a
    /// write-intent bitmap (nothing records what the member missed), a member
    /// whose events are older than the bitmap's events_cleared (bits it needs
    /// were cleared after it left), and a member whose role is taken now.
    pub fn re_add_check(&self, device: &Device) -> Result<ReAdd> {
        let path = &device.path;
        let not_possible = |why: String| {
            Error::new(
                ErrorKind::Refused,
                Op::Write,
                format!("re-add of {path} is not possible: {why}; nothing was changed"),
            )
            .on_device(path.clone())
        };
        let sb = match Superblock::read_from(device.volume.as_ref()) {
            Ok(Some(sb)) => sb,
            Ok(None) => {
                return Err(not_possible(
                    "it carries no md superblock, so it was never a member of this array: `raidlab add` it as a new member".into(),
                ))
            }
            Err(e) => return Err(e.on_device(path.clone())),
        };
        if sb.set_uuid != self.uuid {
            return Err(not_possible(format!(
                "it belongs to array {}, not to this one ({})",
                format_uuid(&sb.set_uuid),
                format_uuid(&self.uuid)
            )));
        }
        let entry = self.entry_of(path, &sb);
        if let Some(i) = entry.filter(|&i| self.members[i].is_live()) {
            return Err(not_possible(format!(
                "it is a member of this array in service ({:?}): there is nothing to re-add",
                self.members[i].state
            )));
        }
        if entry.is_none() && sb.events >= self.events {
            return Err(not_possible(format!(
                "it is up to date (events {}, the array's {}): list it with the members instead",
                sb.events, self.events
            )));
        }
        let Some(bitmap) = &self.bitmap else {
            return Err(not_possible(
                "the array has no write-intent bitmap, so nothing recorded what the member missed: `raidlab add` without --re-add rebuilds it whole".into(),
            ));
        };
        if crate::level::of(&self.geometry).bitmap != crate::level::BitmapUnit::MemberSectors {
            return Err(not_possible(format!(
                "re-add of a {} member is not built yet (its bitmap counts array sectors): `raidlab add` without --re-add rebuilds it whole",
                self.geometry.level.name()
            )));
        }
        let slot = match sb.role() {
            Role::Active(r) if (r as usize) < self.slots.len() => r as usize,
            other => {
                return Err(not_possible(format!(
                    "its own superblock gives it no role in the array ({other:?}): only a member that held a role can go back to it; `raidlab add` adds it as a new member"
                )))
            }
        };
        // A role taken by another member comes first: whatever the bitmap
        // says, the member cannot go back to it (and a complete array's
        // bits are cleared, so the events check would hide the real reason).
        let holder = self.slots[slot].or_else(|| {
            self.members.iter().position(|m| {
                matches!(m.state, MemberState::Rebuilding | MemberState::Replacing)
                    && m.role == Some(slot)
            })
        });
        if let Some(h) = holder {
            return Err(not_possible(format!(
                "its role {slot} is taken by {} ({:?})",
                self.members[h].device.path, self.members[h].state
            )));
        }
        if sb.events < bitmap.sb.events_cleared {
            return Err(not_possible(format!(
                "its events ({}) are older than the bitmap's events cleared ({}): the bitmap was cleared after it left and no longer records everything it missed; `raidlab add` without --re-add rebuilds it whole",
                sb.events, bitmap.sb.events_cleared
            )));
        }
        if geometry_of(&sb).ok() != Some(self.geometry) {
            return Err(not_possible(
                "its superblock describes another shape of the array (level, layout, chunk, size or member count changed since it left): `raidlab add` without --re-add rebuilds it whole".into(),
            ));
        }
        if let Some(o) = self
            .members
            .iter()
            .enumerate()
            .find(|&(j, m)| Some(j) != entry && m.is_live() && m.sb.dev_number == sb.dev_number)
        {
            return Err(not_possible(format!(
                "its device number {} was given to {} since it left: `raidlab add` without --re-add adds it under a new number",
                sb.dev_number, o.1.device.path
            )));
        }
        let need = sb.data_offset * SECTOR + self.geometry.member_bytes;
        if device.volume.size() < need {
            return Err(not_possible(format!(
                "it is {} bytes but its data area needs {need}",
                device.volume.size()
            )));
        }
        if !device.volume.is_writable() {
            return Err(
                Error::new(ErrorKind::ReadOnly, Op::Open, "opened read-only")
                    .on_device(path.clone()),
            );
        }
        Ok(ReAdd {
            slot,
            events: sb.events,
            events_cleared: bitmap.sb.events_cleared,
            dirty_chunks: bitmap.dirty_count(),
        })
    }

    /// Re-add a former member (md's re-add): after [`Assembly::re_add_check`]
    /// passes, it goes back into its old role under its old device number,
    /// keeping its data, as a member being rebuilt whose superblock says the
    /// rebuild is bitmap-based (md's RECOVERY_BITMAP), so `rebuild` rewrites
    /// only the bitmap's dirty chunks. Its superblock is the array's current
    /// one from now on (events, role table), with its own per-device fields.
    pub fn re_add(&mut self, device: Device) -> Result<ReAdd> {
        let plan = self.re_add_check(&device)?;
        let own = Superblock::read_from(device.volume.as_ref())
            .map_err(|e| e.on_device(device.path.clone()))?
            .ok_or_else(|| {
                Error::invalid("the superblock vanished").on_device(device.path.clone())
            })?;
        let template = self.newest_live_superblock()?;
        let mut sb = template;
        // What md keeps per device comes from its own superblock; the rest
        // (events, role table, clean state, the array's features) is the
        // array's now.
        sb.dev_number = own.dev_number;
        sb.device_uuid = own.device_uuid;
        sb.data_offset = own.data_offset;
        sb.data_size = own.data_size;
        sb.super_offset = own.super_offset;
        sb.bblog_shift = own.bblog_shift;
        sb.bblog_size = own.bblog_size;
        sb.bblog_offset = own.bblog_offset;
        sb.devflags = own.devflags;
        sb.cnt_corrected_read = own.cnt_corrected_read;
        sb.feature_map = (sb.feature_map
            & !(feature::BAD_BLOCKS
                | feature::RECOVERY_OFFSET
                | feature::RECOVERY_BITMAP
                | feature::REPLACEMENT))
            | (own.feature_map & feature::BAD_BLOCKS);
        let entry = self.entry_of(&device.path, &own);
        let member = Member {
            device,
            sb,
            state: MemberState::Spare,
            role: None,
        };
        let index = match entry {
            Some(i) => {
                self.members[i] = member;
                i
            }
            None => {
                self.members.push(member);
                self.members.len() - 1
            }
        };
        self.start_recovery(index, plan.slot);
        self.members[index].sb.feature_map |= feature::RECOVERY_BITMAP;
        self.commit(|_| {})?;
        Ok(plan)
    }
}
