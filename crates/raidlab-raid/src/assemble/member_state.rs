//! What each member is to the array (active, rebuilding, spare, stale,
//! faulty, removed, journal), judged from its own superblock against the
//! newest one as md judges it, and the superblock a member one event
//! behind is brought up to.
//!
//! It decides each member's state and slot at assembly. It must never write
//! a superblock (the assembly's commits do) nor choose the newest one.

use super::{Member, MemberState};
use raidlab_md::{Role, Superblock};

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
pub(super) fn member_state(
    reference: &Superblock,
    sb: &Superblock,
) -> (MemberState, Option<usize>) {
    let journal_feature = reference.feature_map & raidlab_md::superblock::feature::JOURNAL != 0;
    let own = sb.role();
    // A device whose own superblock says faulty is never taken for a spare.
    let claims_role = matches!(
        own,
        Role::Active(_) | Role::Replacement(_) | Role::Journal | Role::Faulty
    );
    let in_reference = reference_role(reference, sb);
    if sb.events < reference.events
        && claims_role
        && !one_event_behind(reference, sb, own, in_reference)
    {
        let claimed = match own {
            Role::Active(r) | Role::Replacement(r) => Some(r as usize),
            _ => None,
        };
        if let (Role::Active(_), true) = (own, planted!(StaleMemberTrusted)) {
            return (MemberState::Active, claimed); // PLANTED BUG (tests only, `planted.rs`)
        }
        let state = match in_reference {
            Role::Faulty => MemberState::Faulty,
            Role::Spare | Role::Unknown => MemberState::Removed,
            // A journal behind the array may lack writes the members have: md
            // and mdadm call it stale and will not use it.
            Role::Active(_) | Role::Replacement(_) | Role::Journal => MemberState::Stale,
        };
        return (state, claimed);
    }
    // A spare behind the newest count that the newest table puts in a slot
    // missed the commit that started its rebuild (a cut between the
    // members' superblock writes): how far its rebuild got is in its own
    // superblock, which says spare. md takes a device's role from its own
    // superblock (super_1_validate), so it is a spare here too, never a
    // member in sync holding data it was never given.
    if sb.events < reference.events
        && own == Role::Spare
        && matches!(in_reference, Role::Active(_) | Role::Replacement(_))
    {
        return (MemberState::Spare, None);
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

/// The slot the newest superblock's table gives a spare that missed the
/// commit that started a reshape (a cut between the members' superblock
/// writes of a grow's start): its own superblock, behind the newest, says
/// spare and records no reshape, where the newest records one and puts the
/// device in a slot. Only the superblocks' word; whether the slot is one
/// of the grow's new roles at its very start, which the device may take
/// back, is [`super::Assembly::adopt_roles_missed_at_start`]'s decision.
pub(super) fn missed_grow_start(
    reference: &Superblock,
    sb: &Superblock,
    state: MemberState,
) -> Option<usize> {
    use raidlab_md::superblock::feature;
    let reshaping = |s: &Superblock| s.feature_map & feature::RESHAPE_ACTIVE != 0;
    if state != MemberState::Spare
        || sb.events >= reference.events
        || sb.role() != Role::Spare
        || reshaping(sb)
        || !reshaping(reference)
    {
        return None;
    }
    match reference_role(reference, sb) {
        Role::Active(r) => Some(r as usize),
        _ => None,
    }
}

/// md's "difference of one" (the kernel's `validate_super`, mdadm's
/// Assemble, for 0.90 and 1.x alike): a member exactly one event behind,
/// which the newest superblock still lists where its own superblock says it
/// is, is up to date. A crash between the members' superblock writes of one
/// commit leaves exactly that. Safe because a commit lists a device the
/// array does not have as removed (1.x) or its slot as "removed, faulty"
/// (0.90), so a member that missed writes while away is never listed in its
/// place one event later.
fn one_event_behind(reference: &Superblock, sb: &Superblock, own: Role, listed: Role) -> bool {
    let same_place = match (own, listed) {
        (Role::Active(a), Role::Active(b)) | (Role::Replacement(a), Role::Replacement(b)) => a == b,
        (Role::Journal, Role::Journal) => true,
        _ => false,
    };
    same_place && sb.events + 1 == reference.events
}

/// A member taken one event behind gets the newest superblock's array-wide
/// fields (what the commit it missed changed: the reshape's start or
/// position, the clean/dirty state, the member count), keeping its own
/// per-device ones, so that it serves and is written as its peers are.
pub(super) fn caught_up(reference: &Superblock, own: Superblock) -> Superblock {
    use raidlab_md::superblock::feature;
    let per_device = feature::RECOVERY_OFFSET
        | feature::BAD_BLOCKS
        | feature::REPLACEMENT
        | feature::RECOVERY_BITMAP;
    // The commit it missed may have been a reshape's last, which moves
    // every member's data offset by its `new_offset` (md's end of a
    // reshape): its data is where its peers' is now.
    let (mut data_offset, mut data_size) = (own.data_offset, own.data_size);
    if own.feature_map & feature::NEW_OFFSET != 0
        && reference.feature_map & feature::NEW_OFFSET == 0
    {
        let moved = i64::from(own.new_offset);
        data_offset = (data_offset as i64 + moved) as u64;
        data_size = (data_size as i64 - moved) as u64;
    }
    // The commit it missed may have been a backward reshape's start, which
    // gives a member whose data size does not reach past the component size
    // plus the move up more of its room (mdadm raises each member's size
    // before it sets `new_offset`, as md accepts a move only within it; a
    // RAID 0's shrink needs it, its data size being its used size): without
    // it the new geometry would not fit the member, and the reshape's end
    // would take the move out of a data size that never had it.
    if own.feature_map & feature::NEW_OFFSET == 0
        && reference.feature_map & feature::NEW_OFFSET != 0
        && reference.new_offset > 0
    {
        data_size = data_size.max(reference.size + u64::from(reference.new_offset.unsigned_abs()));
    }
    // The commit it missed may have taken a RAID 4 without its parity
    // member back as a RAID 0 (the end of a RAID 0 restripe), which gives
    // every member the component size as its data size (md's
    // `raid0_takeover_raid45`): without it, its own older size would make
    // the RAID 0 look like one of several zones.
    if reference.level == 0 && own.level == 4 {
        data_size = reference.size;
    }
    Superblock {
        feature_map: (reference.feature_map & !per_device) | (own.feature_map & per_device),
        data_offset,
        data_size,
        super_offset: own.super_offset,
        recovery_offset: own.recovery_offset,
        dev_number: own.dev_number,
        cnt_corrected_read: own.cnt_corrected_read,
        device_uuid: own.device_uuid,
        devflags: own.devflags,
        bblog_shift: own.bblog_shift,
        bblog_size: own.bblog_size,
        bblog_offset: own.bblog_offset,
        ..reference.clone()
    }
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
