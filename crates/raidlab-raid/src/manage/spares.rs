//! md's hot spares into the roles a degraded array misses
//! (`remove_and_add_spares`, run when md starts an array for writing): the
//! spares go into the missing roles, to be rebuilt. A writable start does
//! it (`lifecycle::StartedParts::take_spares`, for `raidlab serve`), and so
//! does the offline `raidlab rebuild`, as `mdadm --assemble` would.
//!
//! What it decides: whether spares are taken at all (only for a writable
//! array, no reshape recorded, redundancy trusted by the caller's rule,
//! an array that still serves its data, a level with redundancy; with a
//! reason when one of the first three stops it), which spare goes into
//! which role (the lowest missing role first, the spares in the order the
//! array lists them, as `fail`'s spare takes a slot) and what their
//! superblocks say then (rebuilding from 0, the array's settings as the
//! newest superblock has them). It never moves data: the caller's rebuild
//! does (the server's live rebuild, the offline rebuild, the simulation's),
//! and says its progress as any rebuild's.

use super::*;

/// What a start did with its hot spares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparesAtStart {
    /// The spares put into missing roles, as (index into `members`, role).
    pub taken: Vec<(usize, usize)>,
    /// Why none was taken though a role is missing and a spare is there.
    pub waits: Option<NoSpareTaken>,
}

/// Why a start takes no spare, when it has spares and misses a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSpareTaken {
    /// A reshape is recorded: md runs the reshape first and rebuilds after
    /// it; a reshape does not run degraded in raidlab, so the spare waits.
    Reshaping,
    /// Started read-only: nothing is written (md takes spares only into a
    /// writable array).
    ReadOnly,
    /// Stopped uncleanly and not resynced: parity or copies may disagree,
    /// so what a rebuild would compute for the role may be wrong (a
    /// recorded rebuild is not resumed either; md refuses to start such an
    /// array without --force).
    Inconsistent,
}

impl std::fmt::Display for NoSpareTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoSpareTaken::Reshaping => "a reshape is recorded: the hot spare goes into the missing role once the reshape is done and the array started again",
            NoSpareTaken::ReadOnly => "the array is started read-only: serve it writable to rebuild the missing role onto the hot spare",
            NoSpareTaken::Inconsistent => "the array was not stopped cleanly and is degraded (parity may be stale): not rebuilding onto the hot spare; stop, resync and serve it again",
        })
    }
}

impl Assembly {
    /// md's start of a degraded array with hot spares: each missing role,
    /// lowest first, gets the next hot spare (not faulty, not a journal),
    /// recorded as being rebuilt into it from 0, all in one commit. Returns
    /// the members taken; none when nothing is missing, no spare is left,
    /// the level has no redundancy to rebuild from, or the array could not
    /// serve its data anyway. An array with a reshape recorded, a
    /// read-only start (`writable` false) and one not `consistent` (the
    /// start's: clean, or resynced at start) take none and say why (md's
    /// order: a reshape first, spares after it). The error is the commit's;
    /// the assembly is then as it was.
    pub fn spares_into_missing_roles(
        &mut self,
        writable: bool,
        consistent: bool,
    ) -> Result<SparesAtStart> {
        let missing = self.missing();
        let survives = self.survives(&missing);
        let spares: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].state == MemberState::Spare)
            .collect();
        let wanted = !missing.is_empty() && !spares.is_empty();
        let waits = |why| {
            Ok(SparesAtStart {
                taken: Vec::new(),
                waits: Some(why),
            })
        };
        if wanted && self.reshape().is_some() {
            return waits(NoSpareTaken::Reshaping);
        }
        if wanted && !writable {
            return waits(NoSpareTaken::ReadOnly);
        }
        if wanted && !consistent {
            return waits(NoSpareTaken::Inconsistent);
        }
        let open: Vec<usize> = missing
            .into_iter()
            .filter(|&r| !self.slot_is_being_rebuilt(r))
            .collect();
        if !wanted || open.is_empty() || !crate::level::of(&self.geometry).resyncs || !survives {
            return Ok(SparesAtStart::default());
        }
        Ok(SparesAtStart {
            taken: self.take_spares(open, spares)?,
            waits: None,
        })
    }

    fn take_spares(&mut self, open: Vec<usize>, spares: Vec<usize>) -> Result<Vec<(usize, usize)>> {
        let before: Vec<(Superblock, MemberState, Option<usize>)> = self
            .members
            .iter()
            .map(|m| (m.sb.clone(), m.state, m.role))
            .collect();
        let taken: Vec<(usize, usize)> = spares.into_iter().zip(open).collect();
        // A spare a cut left behind a commit (one that gave it a role its
        // own superblock never took) was assembled with the array's
        // settings from the newest superblock (`assemble`, as md's
        // `sync_super` writes every device from the array's), so its
        // superblock is the array's here.
        for &(i, role) in &taken {
            self.start_recovery(i, role);
        }
        if let Err(e) = self.commit(|_| {}) {
            for (m, (sb, state, role)) in self.members.iter_mut().zip(before) {
                m.sb = sb;
                m.state = state;
                m.role = role;
            }
            return Err(e);
        }
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{create, CreateSpec};
    use raidlab_devices::MemVolume;
    use raidlab_layout::{Layout, Level, ParityLayout};
    use std::sync::Arc;

    /// A RAID 5 of three members and a spare, assembled again without
    /// member 2: role 2 missing beside the spare.
    fn degraded_beside_a_spare() -> (Assembly, Vec<Device>) {
        degraded(4, 1, false)
    }

    /// A RAID 5 of three members and `spares` spares (`n` devices), grown
    /// by one member when `grow` (its reshape recorded, not walked), then
    /// assembled again without member 2.
    fn degraded(n: usize, spares: usize, grow: bool) -> (Assembly, Vec<Device>) {
        let devices: Vec<Device> = (0..n)
            .map(|i| Device {
                path: format!("mem{i}"),
                volume: Arc::new(MemVolume::new(4 << 20)),
            })
            .collect();
        let spec = CreateSpec {
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            chunk_bytes: 64 << 10,
            spares,
            name: "spares".into(),
            force: false,
            bitmap: false,
            bitmap_chunk: None,
            ppl: false,
        };
        let new = devices
            .iter()
            .map(|d| crate::assemble::NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec, new).unwrap();
        if grow {
            let req = crate::grow::ReshapeRequest {
                raid_devices: Some(4),
                ..Default::default()
            };
            let plan = asm.reshape_check(&req, 0).unwrap();
            asm.reshape_start(plan).unwrap();
        }
        drop(asm);
        let given: Vec<Device> = (0..n)
            .filter(|&i| i != 2)
            .map(|i| devices[i].clone())
            .collect();
        let asm = Assembly::assemble(given.clone()).unwrap();
        assert_eq!(asm.missing(), vec![2]);
        (asm, given)
    }

    #[test]
    fn a_writable_consistent_start_puts_the_spare_into_the_missing_role() {
        let (mut asm, given) = degraded_beside_a_spare();
        let s = asm.spares_into_missing_roles(true, true).unwrap();
        assert_eq!((s.taken, s.waits), (vec![(2, 2)], None));
        // Recorded: assembled again, the spare is being rebuilt into role 2.
        let again = Assembly::assemble(given).unwrap();
        assert_eq!(again.rebuilding(), vec![(2, 2)]);
        assert_eq!(again.members[2].device.path, "mem3");
    }

    #[test]
    fn read_only_unclean_and_mid_reshape_starts_take_no_spare_and_say_why() {
        let (mut asm, given) = degraded_beside_a_spare();
        let events = asm.members[0].sb.events;
        let ro = asm.spares_into_missing_roles(false, true).unwrap();
        assert_eq!(
            (ro.taken.len(), ro.waits),
            (0, Some(NoSpareTaken::ReadOnly))
        );
        let dirty = asm.spares_into_missing_roles(true, false).unwrap();
        assert_eq!(dirty.waits, Some(NoSpareTaken::Inconsistent));
        // Nothing written.
        let again = Assembly::assemble(given).unwrap();
        assert_eq!(again.members[0].sb.events, events);
        assert!(again.rebuilding().is_empty());
        // A grow recorded, a member missing, a spare left: the reshape
        // first (md's order).
        let (mut asm, _) = degraded(5, 2, true);
        assert!(asm.reshape().is_some());
        let mid = asm.spares_into_missing_roles(true, true).unwrap();
        assert_eq!(mid.waits, Some(NoSpareTaken::Reshaping));
    }
}
