//! The steps of a level change by md's takeovers, as data: which request is
//! a level change at all ([`is_conversion`]), and the steps md makes it in,
//! in order ([`conversion_steps`]): the devices given added as spares, the
//! takeover (one superblock commit), the rebuild of what it left to compute
//! (parity, Q, the mirrors), a restripe onto more members or to another
//! layout. The offline `grow`, the server's served level change and the
//! served fault simulation all run these same steps, each its own way.
//!
//! It decides only the plan. It must never check a conversion itself (md's
//! rules are [`Assembly::convert_check`] and `reshape_check`), never write
//! anything, and never move data: the takeovers are `convert`'s and
//! `raid0`'s, the rebuild `recovery`'s, the restripes `walk`'s.

use super::reshape::ReshapeRequest;
use crate::assemble::Assembly;
use raidlab_core::{Error, Result};
use raidlab_layout::Level;

/// One step of a level change, in the order md makes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The devices given with `--add` go in as spares, for `what` (parity,
    /// Q, the mirrors, the reshape).
    Add { what: &'static str },
    /// md's takeover: the superblocks say the new level in one commit.
    Takeover(Takeover),
    /// The rebuild of what the takeover left to compute on the new
    /// member(s) (`what`: parity, Q, the mirrors).
    Rebuild { what: &'static str },
    /// A restripe to this layout, same level and members.
    Restripe(String),
    /// A restripe onto this many members (the spares added for it).
    Reshape(usize),
}

/// Which of md's takeovers a [`Step::Takeover`] is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Takeover {
    /// RAID 5 of n as RAID 6 of n+1 in the "-6" layout (Q to be rebuilt).
    Raid6,
    /// RAID 6 in a "-6" layout as RAID 5 (Q's member a spare).
    Raid5FromRaid6,
    /// RAID 0 as RAID 4 or 5 in parity-last (parity to be rebuilt).
    Raid0Parity(Level),
    /// RAID 0 as RAID 10 (the mirrors to be rebuilt).
    Raid10FromRaid0,
    /// RAID 4 or 5 in parity-last as RAID 0.
    Raid0FromRaid45,
    /// RAID 10 as RAID 0 (one copy of each pair kept).
    Raid0FromRaid10,
    /// RAID 1 of two as RAID 5 of two.
    Raid5FromRaid1,
    /// RAID 5 of two as RAID 1.
    Raid1FromRaid5,
}

impl Takeover {
    /// Make the takeover on `asm` (its own checks, one commit).
    pub fn apply(self, asm: &mut Assembly) -> Result<()> {
        match self {
            Takeover::Raid6 => asm.raid6_takeover(),
            Takeover::Raid5FromRaid6 => asm.raid5_takeover(),
            Takeover::Raid0Parity(to) => asm.raid0_parity_takeover(to),
            Takeover::Raid10FromRaid0 => asm.raid10_takeover_raid0(),
            Takeover::Raid0FromRaid45 => asm.raid0_takeover_raid45(),
            Takeover::Raid0FromRaid10 => asm.raid0_takeover_raid10(),
            Takeover::Raid5FromRaid1 => asm.raid5_takeover_raid1(),
            Takeover::Raid1FromRaid5 => asm.raid1_takeover_raid5(),
        }
    }

    /// What the takeover leaves to rebuild on the new member(s), if any.
    pub fn rebuilds(self) -> Option<&'static str> {
        match self {
            Takeover::Raid6 => Some("Q"),
            Takeover::Raid0Parity(_) => Some("parity"),
            Takeover::Raid10FromRaid0 => Some("the mirrors"),
            _ => None,
        }
    }
}

/// Whether `req` asks `asm` for a level change by md's takeovers (rather
/// than a restripe `reshape_check` takes, a RAID 4 to 5 among them).
/// Asking for the level the array has is none (a RAID 1's `--level 1
/// --raid-devices N` changes its mirror count), nor is one with a new chunk.
pub fn is_conversion(asm: &Assembly, req: &ReshapeRequest) -> bool {
    req.level != Some(asm.geometry.level)
        && matches!(
            (asm.geometry.level, req.level),
            (Level::Raid5, Some(Level::Raid6))
                | (Level::Raid6, Some(Level::Raid5))
                | (
                    Level::Raid0,
                    Some(Level::Raid4 | Level::Raid5 | Level::Raid10)
                )
                | (
                    Level::Raid10 | Level::Raid4 | Level::Raid5,
                    Some(Level::Raid0)
                )
                | (Level::Raid1, Some(_))
                | (Level::Raid5, Some(Level::Raid1))
        )
        && req.chunk_bytes.is_none()
}

/// The steps of the level change `req` asks of `asm` (one
/// [`is_conversion`] says is), with `adds` devices given to add: md's
/// checks (`convert_check`) and the checks of how many devices each takes,
/// then the order md makes them in. Nothing is written.
pub fn conversion_steps(asm: &Assembly, req: &ReshapeRequest, adds: usize) -> Result<Vec<Step>> {
    let from = asm.geometry.level;
    let to = req.level.unwrap_or(from);
    // RAID 1 to 5 and RAID 0 to 10 take several, and RAID 0 to 4 or 5
    // with --raid-devices (their own checks).
    if adds > 1 && !matches!(from, Level::Raid1 | Level::Raid0) {
        return Err(Error::invalid(format!(
            "{adds} devices given with --add: the conversion takes one, for Q; add the others as spares with `raidlab add`; nothing was changed"
        )));
    }
    if to == Level::Raid5 && from == Level::Raid6 && adds > 0 {
        return Err(Error::invalid(
            "--add goes with --level 6 (the device for Q), not --level 5; nothing was changed",
        ));
    }
    let c = asm.convert_check(to, req.raid_devices, req.layout.as_deref(), adds)?;
    let restripe = c.restripe_to.clone().map(Step::Restripe);
    if to == Level::Raid1 {
        if adds > 0 {
            return Err(Error::invalid("--add goes with a level that takes new members; a RAID 5 of two becoming a RAID 1 takes none (add mirrors after, with `raidlab grow --raid-devices`); nothing was changed"));
        }
        return Ok(vec![Step::Takeover(Takeover::Raid1FromRaid5)]);
    }
    if to == Level::Raid0 {
        if adds > 0 {
            return Err(Error::invalid(format!("--add goes with a level that takes new members; a {} becoming a RAID 0 takes none; nothing was changed", from.name())));
        }
        if from == Level::Raid10 {
            return Ok(vec![Step::Takeover(Takeover::Raid0FromRaid10)]);
        }
        // mdadm restripes a RAID 5 to parity-last first, then the parity
        // member leaves.
        return Ok(restripe
            .into_iter()
            .chain([Step::Takeover(Takeover::Raid0FromRaid45)])
            .collect());
    }
    if from == Level::Raid1 {
        // md's takeover, then (with --raid-devices) a restripe onto the
        // devices added for it.
        if adds > c.new_raid_devices - 2 {
            return Err(Error::invalid(format!(
                "{adds} device(s) given with --add but only {} new slot(s) (--raid-devices {}): add the others as spares with `raidlab add`; nothing was changed",
                c.new_raid_devices - 2,
                c.new_raid_devices
            )));
        }
        let mut steps = vec![Step::Takeover(Takeover::Raid5FromRaid1)];
        if c.new_raid_devices > c.old_raid_devices {
            if adds > 0 {
                steps.push(Step::Add {
                    what: "the reshape",
                });
            }
            steps.push(Step::Reshape(c.new_raid_devices));
        }
        return Ok(steps);
    }
    let from_raid0 = from == Level::Raid0;
    if to == Level::Raid6 || from_raid0 {
        let takeover = match (from_raid0, to) {
            (true, Level::Raid10) => Takeover::Raid10FromRaid0,
            (true, _) => Takeover::Raid0Parity(to),
            _ => Takeover::Raid6,
        };
        let what = takeover.rebuilds().unwrap_or_default();
        if adds > c.new_raid_devices - c.old_raid_devices {
            return Err(Error::invalid(format!(
                "{adds} devices given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
                c.new_raid_devices - c.old_raid_devices
            )));
        }
        let mut steps = Vec::new();
        if adds > 0 {
            steps.push(Step::Add { what });
        }
        steps.push(Step::Takeover(takeover));
        steps.push(Step::Rebuild { what });
        // A RAID 0 asked for more members than the one parity takes: the
        // others join by a reshape once parity is there.
        if from_raid0 && to != Level::Raid10 && c.new_raid_devices > c.old_raid_devices + 1 {
            steps.push(Step::Reshape(c.new_raid_devices));
        }
        steps.extend(restripe);
        return Ok(steps);
    }
    Ok(restripe
        .into_iter()
        .chain([Step::Takeover(Takeover::Raid5FromRaid6)])
        .collect())
}

/// The restripe a [`Step::Restripe`] or [`Step::Reshape`] asks for (none
/// for the other steps).
pub fn step_request(step: &Step) -> ReshapeRequest {
    match step {
        Step::Restripe(l) => ReshapeRequest {
            layout: Some(l.clone()),
            ..ReshapeRequest::default()
        },
        Step::Reshape(n) => ReshapeRequest {
            raid_devices: Some(*n),
            ..ReshapeRequest::default()
        },
        _ => ReshapeRequest::default(),
    }
}
